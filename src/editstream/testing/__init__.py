"""Helpers for tests, demos and benchmarks: synthetic datasets and a local S3 server."""
