"""Declare, test and package Python functions for eddy.

eddy runs Python functions that SQL declares::

    CREATE FUNCTION risk(amount DOUBLE, method VARCHAR) RETURNS VARCHAR
    LANGUAGE PYTHON AS 'scoring:risk';

This module lets the function's author keep the declaration beside the code
and test the function on a pyarrow table the way eddy calls it, without
eddy::

    from eddy_udf import scalar, aggregate, declaration, call, fold

    @scalar("amount DOUBLE", "method VARCHAR", returns="VARCHAR")
    def risk(amount, method):
        ...

    print(declaration(risk))          # the CREATE FUNCTION statement
    call(risk, table, "amount", "method")   # a pyarrow array, as eddy computes it

How eddy calls a function (and `call` does too):

- row at a time (the default): once per row with Python values (None for
  NULL; TIMESTAMP as a naive datetime in UTC, DATE as a date); a row whose
  call raises is NULL (or fails the job with ``on_error = 'fail'``);
- vectorized (``vectorized=True``): once per batch with pyarrow arrays,
  returning an array of the same length;
- an aggregate is a class: ``accumulate(*args)`` per row, ``retract(*args)``
  when a row is taken back (updating queries, sliding OVER frames),
  ``merge(other)`` to combine partial states, ``finish()`` for the value.
  eddy pickles instances between batches and in its checkpoints, so they
  must pickle (``fold`` checks that, and that ``merge`` agrees with one
  instance seeing every row).
"""

import pickle

__all__ = ["scalar", "aggregate", "declaration", "call", "fold"]


def _declare(target, args, returns, kind, vectorized, on_error, timeout):
    target.__eddy__ = {
        "args": list(args),
        "returns": returns,
        "kind": kind,
        "vectorized": vectorized,
        "on_error": on_error,
        "timeout": timeout,
    }
    return target


def scalar(*args, returns, vectorized=False, on_error=None, timeout=None):
    """Declares a scalar function: ``args`` are ``"name TYPE"`` strings."""
    return lambda f: _declare(f, args, returns, "scalar", vectorized, on_error, timeout)


def aggregate(*args, returns, on_error=None, timeout=None):
    """Declares an aggregate class (accumulate, merge, finish, retract)."""
    def wrap(cls):
        for method in ("accumulate", "finish"):
            if not callable(getattr(cls, method, None)):
                raise TypeError(f"aggregate {cls.__name__} has no {method} method")
        return _declare(cls, args, returns, "aggregate", False, on_error, timeout)
    return wrap


def declaration(target, name=None, module=None):
    """The SQL statement that declares ``target`` for eddy, importing it as
    ``module:attribute`` (its own module by default) from ``--udf-path``."""
    spec = getattr(target, "__eddy__", None)
    if spec is None:
        raise TypeError(f"{target!r} has no eddy declaration (use @scalar or @aggregate)")
    name = name or target.__name__
    module = module or target.__module__
    options = []
    if spec["vectorized"]:
        options.append("vectorized = true")
    if spec["on_error"]:
        options.append(f"on_error = '{spec['on_error']}'")
    if spec["timeout"]:
        options.append(f"timeout = '{spec['timeout']}'")
    with_clause = f" WITH ({', '.join(options)})" if options else ""
    what = "AGGREGATE FUNCTION" if spec["kind"] == "aggregate" else "FUNCTION"
    return (f"CREATE {what} {name}({', '.join(spec['args'])}) RETURNS {spec['returns']} "
            f"LANGUAGE PYTHON{with_clause} AS '{module}:{target.__name__}';")


def _columns(table, names):
    return [table.column(n).combine_chunks() if hasattr(table, "column") else table[n] for n in names]


def call(function, table, *columns, on_error="null"):
    """``function`` applied to ``columns`` of a pyarrow table as eddy applies
    it: a pyarrow array, NULL where a row raised (``on_error='fail'``
    re-raises)."""
    import pyarrow as pa
    arrays = _columns(table, columns)
    spec = getattr(function, "__eddy__", {})
    if spec.get("vectorized"):
        result = function(*arrays)
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        if len(result) != table.num_rows:
            raise ValueError(f"{function.__name__} returned {len(result)} values for {table.num_rows} rows")
        return result
    out = []
    for args in zip(*[a.to_pylist() for a in arrays]) if arrays else [()] * table.num_rows:
        try:
            out.append(function(*args))
        except Exception:
            if on_error == "fail":
                raise
            out.append(None)
    return pa.array(out)


def fold(cls, table, *columns, group_by=None, batch_rows=1024):
    """Runs aggregate ``cls`` over ``columns`` of a pyarrow table per group
    (``group_by`` a column name, or one group) as eddy does: batches of
    ``batch_rows`` with each group's instance pickled between them, then
    checks that merging two halves gives the same value. Returns
    ``{group: value}``."""
    arrays = [a.to_pylist() for a in _columns(table, columns)]
    keys = table.column(group_by).to_pylist() if group_by else [None] * table.num_rows
    rows = list(zip(keys, zip(*arrays))) if arrays else [(k, ()) for k in keys]

    def run(part):
        states = {}
        for start in range(0, len(part), batch_rows):
            live = {k: pickle.loads(s) for k, s in states.items()}
            for key, args in part[start:start + batch_rows]:
                if key not in live:
                    live[key] = cls()
                live[key].accumulate(*args)
            states = {k: pickle.dumps(a) for k, a in live.items()}
        return {k: pickle.loads(s) for k, s in states.items()}

    whole = {k: a.finish() for k, a in run(rows).items()}
    if callable(getattr(cls, "merge", None)):
        half = len(rows) // 2
        first, second = run(rows[:half]), run(rows[half:])
        for key, other in second.items():
            if key in first:
                first[key].merge(other)
            else:
                first[key] = other
        merged = {k: a.finish() for k, a in first.items()}
        if merged != whole:
            raise AssertionError(f"{cls.__name__}: merging two halves gives {merged}, one pass gives {whole}")
    return whole
