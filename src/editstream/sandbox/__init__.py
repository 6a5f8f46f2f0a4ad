"""What lets editstream run with nothing of a user's: synthetic datasets of every kind (the ``synth`` command, the
plug-in synth helpers) and a local S3 server on loopback (``make demo`` and the tests use it)."""
