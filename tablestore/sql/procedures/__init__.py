"""Stored procedures (``CALL cat.system.name(...)``): ``registry.py`` registers and finds them,
``arguments.py`` reads their literal arguments, and each family has its module (maintenance,
columns, refs, changelog). The CALL statement's handler is :mod:`tablestore.sql.run.procedures`.
"""
