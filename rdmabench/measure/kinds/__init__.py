"""The built-in tests, registered on import. A new built-in test is a module here plus its line below."""

from . import bibw, bw, get, get_lat, lat, offload, put, put_lat  # noqa: F401
