"""Opening data: units, rows and the row sources every backend reads through, below both the
converter and the loader so that each of them (and every command) reads data one way."""
