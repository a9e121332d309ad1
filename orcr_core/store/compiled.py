"""Queries the server runs all the time, compiled to SQL once.

peewee builds a query's text from its node tree at every execution: a whole-row
SELECT of the agent table walks some fifty columns each time. That walk was the
largest single share of an agent's server CPU (``bench/lifetime.py --profile``): the
pipeline and the delivery re-read their row many times per start and per send, and
the monitor re-reads every active row after each write. :class:`CompiledModel` keeps
the text of those few shapes and builds the instances as peewee's cursor wrapper
does (each value through its field's ``python_value``, nothing dirty).
"""

from __future__ import annotations

from peewee import OP, Expression, Field, Model, Node


class CompiledModel(Model):
    @classmethod
    def get_by_id(cls, pk):
        """The row by primary key, as peewee's ``get_by_id`` returns it, from SQL
        compiled once per model: peewee builds every query's text from its node tree
        again, and ``Agent.get_by_id`` (each re-read of a row mid-start or mid-send)
        was the largest single share of an agent's server CPU (bench/lifetime.py)."""
        sql, _, fields = cls.compiled(
            "by_id", lambda: cls.select().where(cls._meta.primary_key == 0)
        )
        row = cls._meta.database.execute_sql(sql, (pk,)).fetchone()
        if row is None:
            raise cls.DoesNotExist(f"{cls.__name__} instance matching query does not exist: {pk!r}")
        return cls.from_row(fields, row)

    @classmethod
    def get(cls, *query, **filters):
        """peewee's ``Model.get``; ``Model.get(Model.field == value)`` (a row by one
        column, how most code finds an agent by uuid) from SQL compiled once per field."""
        if len(query) == 1 and not filters:
            e = query[0]
            if (
                isinstance(e, Expression)
                and e.op == OP.EQ
                and isinstance(e.lhs, Field)
                and e.lhs.model is cls
                and e.rhs is not None
                and not isinstance(e.rhs, Node)
            ):
                field = e.lhs
                sql, params, fields = cls.compiled(
                    f"get:{field.name}", lambda: cls.select().where(field == e.rhs).limit(1)
                )
                args = (field.db_value(e.rhs), *params[1:])
                row = cls._meta.database.execute_sql(sql, args).fetchone()
                if row is None:
                    raise cls.DoesNotExist(
                        f"{cls.__name__} instance matching query does not exist: "
                        f"{field.name} = {e.rhs!r}"
                    )
                return cls.from_row(fields, row)
        return super().get(*query, **filters)

    @classmethod
    def compiled(cls, key: str, build) -> tuple[str, tuple, list]:
        """``(sql, params, fields)`` of the query ``build()`` returns (a whole-row
        select of this model), compiled at its first use under ``key`` and kept."""
        cache = cls.__dict__.get("_compiled")
        if cache is None:
            cache = cls._compiled = {}
        entry = cache.get(key)
        if entry is None:
            sql, params = build().sql()
            entry = cache[key] = (
                sql,
                tuple(params),
                [(f.name, f.python_value) for f in cls._meta.sorted_fields],
            )
        return entry

    @classmethod
    def update_where(cls, fields: dict, pk, **equal) -> int:
        """``cls.update(**fields).where(pk == pk & each field == its value)``, as peewee
        runs it (each value through its field's ``db_value``), from SQL written once per
        set of columns: the UPDATEs of every state change and of every recorded fact
        (pane ids, progress) were the largest share of peewee left in a lifetime's CPU.
        A value that is a query node (``Agent.turn + 1``) goes through peewee. The
        number of rows changed."""
        if any(isinstance(v, Node) for v in (*fields.values(), *equal.values())):
            where = cls._meta.primary_key == pk
            for name, value in equal.items():
                where &= cls._meta.combined[name] == value
            return cls.update(**fields).where(where).execute()
        cache = cls.__dict__.get("_compiled")
        if cache is None:
            cache = cls._compiled = {}
        key = ("update", tuple(fields), tuple(equal))
        entry = cache.get(key)
        if entry is None:
            meta = cls._meta
            table = f'"{meta.table_name}"'
            sets = [meta.combined[name] for name in fields]
            wheres = [meta.primary_key, *(meta.combined[name] for name in equal)]
            sql = (
                f"UPDATE {table} SET "
                + ", ".join(f'"{f.column_name}" = ?' for f in sets)
                + " WHERE "
                + " AND ".join(f'({table}."{f.column_name}" = ?)' for f in wheres)
            )
            entry = cache[key] = (sql, [f.db_value for f in (*sets, *wheres)])
        sql, convert = entry
        values = (*fields.values(), pk, *equal.values())
        args = tuple(conv(v) for conv, v in zip(convert, values, strict=True))
        return cls._meta.database.execute_sql(sql, args).rowcount

    @classmethod
    def select_compiled(cls, key: str, build) -> list:
        """The rows of ``build()`` (a whole-row select with fixed parameters), its SQL
        compiled once: for queries a loop runs after every write (the monitor's)."""
        sql, params, fields = cls.compiled(key, build)
        return [cls.from_row(fields, row) for row in cls._meta.database.execute_sql(sql, params)]

    @classmethod
    def from_row(cls, fields: list, row: tuple):
        """An instance of a whole-row select's row, as peewee's cursor wrapper makes it
        (each value through its field's ``python_value``, nothing dirty), without one
        attribute assignment per field."""
        obj = cls(__no_default__=1)
        obj.__data__.update({name: conv(v) for (name, conv), v in zip(fields, row, strict=True)})
        return obj
