"""HTTP layer: app factory, routes, wire schemas and the error envelope."""
