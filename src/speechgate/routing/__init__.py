"""Provider routing: a public model name served by weighted providers (the local engine pools
or remote OpenAI-compatible upstreams), with failover, circuit breakers and shadow traffic.

config (the routes file), choice (pure: who serves a request, in which order), breaker (per
provider health), providers (local and remote), shadow (duplicate requests and their
comparison), router (ties them together for one request), control (runtime changes).
"""
