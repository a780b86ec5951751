"""Imported by the fork server only (`workers.forking`): what every engine process reads before
its first job, read once there, so that each process it forks starts with it."""

from speechgate.text import normalize

normalize.warm_all()
