"""The HTTP endpoints, one module per resource of the REST spec (and of tablestore's
extensions): each holds a FastAPI router that ``tablestore.rest.app`` includes."""
