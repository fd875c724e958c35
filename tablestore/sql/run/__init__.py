"""The statement handlers: one module per capability, each a set of functions of the session's
:class:`~tablestore.sql.context.SessionContext` and one parsed statement, and ``registry.py``,
the one map from statement type to handler that the session looks statements up in.
"""
