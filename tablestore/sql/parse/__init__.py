"""The grammar: a script's tokens, its statements split, and each statement parsed into a
plain-data statement of :mod:`tablestore.sql.parse.statements`.

``parser.py`` reads the common statements and dispatches the others by their first keyword to
the module of their capability (``row_level``, ``schema``, ``partitions``, ``refs``,
``external``, ``procedures``, ``options``); ALTER TABLE extensions are typed
:class:`~tablestore.sql.parse.parser.AlterTableAction` functions. Nothing here runs anything.
"""
