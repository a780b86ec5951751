"""What a voice is, below the engines: names and languages (`naming`), and the items installed
in the data directory with their manifests (`installed`). Imports nothing heavy; cloned voices
live beside the service, in `speechgate.cloning`."""
