"""eddy's Python function worker.

eddy starts this program (`python3 -c <loader> <length>`, the loader reading
this text from stdin) and then speaks to it over stdin and stdout in frames:
an 8-byte little-endian length, then the payload, whose first byte says what
it is. Columns travel as Arrow's own buffers (validity bitmap, values or
offsets and data), so a vectorized function receives pyarrow arrays built on
the received bytes without a copy, and a row-at-a-time function needs only
the standard library. What the frames hold is described in eddy's
`crates/eddy-python/src/wire.rs`; the two files change together.

Anything the functions print goes to stderr (fd 1 is taken over for the
frames). The worker exits when eddy closes stdin or goes away.
"""

import datetime
import importlib
import json
import linecache
import os
import pickle
import struct
import sys
import textwrap
import threading
import time
import traceback
import types
from array import array

# Requests.
HELLO, CALL, AGG_UPDATE, AGG_MERGE, AGG_FINISH, AGG_STEPS = 1, 2, 3, 4, 5, 6
# Replies.
OK, RESULT, STATES, ERROR = 10, 11, 12, 13
# Error kinds.
E_RAISED, E_DEFINITION, E_RETURN = 1, 2, 3

# Column kinds (wire.rs: `Kind`).
BOOL, I8, I16, I32, I64, F32, F64, UTF8, BINARY = 1, 2, 3, 4, 5, 6, 7, 8, 9
TS_S, TS_MS, TS_US, TS_NS, DATE32 = 10, 11, 12, 13, 14
U8, U16, U32, U64 = 15, 16, 17, 18
FIXED = {I8: "b", I16: "h", I32: "i", I64: "q", F32: "f", F64: "d",
         U8: "B", U16: "H", U32: "I", U64: "Q",
         TS_S: "q", TS_MS: "q", TS_US: "q", TS_NS: "q", DATE32: "i"}
WIDTH = {k: array(v).itemsize for k, v in FIXED.items()}
INTEGERS = {I8, I16, I32, I64, U8, U16, U32, U64}
TIMES = {TS_S: 1_000_000, TS_MS: 1_000, TS_US: 1, TS_NS: None}
EPOCH = datetime.datetime(1970, 1, 1)
EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
SQL_NAMES = {BOOL: "BOOLEAN", I8: "TINYINT", I16: "SMALLINT", I32: "INT", I64: "BIGINT",
             F32: "FLOAT", F64: "DOUBLE", UTF8: "VARCHAR", BINARY: "BYTEA",
             TS_S: "TIMESTAMP(0)", TS_MS: "TIMESTAMP(3)", TS_US: "TIMESTAMP(6)",
             TS_NS: "TIMESTAMP(9)", DATE32: "DATE", U8: "TINYINT UNSIGNED",
             U16: "SMALLINT UNSIGNED", U32: "INT UNSIGNED", U64: "BIGINT UNSIGNED"}


def user_traceback():
    """The current exception's traceback from the function's own frames on
    (the worker's frames above them say nothing to the user)."""
    kind, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename == WORKER_FILE:
        tb = tb.tb_next
    return "".join(traceback.format_exception(kind, value, tb))


WORKER_FILE = "eddy-python-worker"


class Failure(Exception):
    """Ends a request with an error frame."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


# ---------------------------------------------------------------- reading

class Reader:
    def __init__(self, payload):
        self.view = memoryview(payload)
        self.pos = 1

    def u8(self):
        value = self.view[self.pos]
        self.pos += 1
        return value

    def u32(self):
        (value,) = struct.unpack_from("<I", self.view, self.pos)
        self.pos += 4
        return value

    def u64(self):
        (value,) = struct.unpack_from("<Q", self.view, self.pos)
        self.pos += 8
        return value

    def align(self):
        self.pos = (self.pos + 7) & ~7

    def buffer(self):
        self.align()
        size = self.u64()
        start = self.pos
        self.pos += size
        return self.view[start:self.pos]

    def column(self):
        """(kind, length, null_count, validity or None, [buffers])."""
        self.align()
        kind = self.u8()
        self.pos += 7
        length = self.u64()
        nulls = self.u64()
        validity = self.buffer()
        buffers = [self.buffer()]
        if kind in (UTF8, BINARY):
            buffers.append(self.buffer())
        return kind, length, nulls, (validity if nulls else None), buffers


def valid_bits(validity, length):
    return [(validity[i >> 3] >> (i & 7)) & 1 for i in range(length)]


def to_python(column):
    """A column as a list of Python values (None for NULL)."""
    kind, length, nulls, validity, buffers = column
    if kind == BOOL:
        bits = buffers[0]
        values = [bool((bits[i >> 3] >> (i & 7)) & 1) for i in range(length)]
    elif kind in (UTF8, BINARY):
        offsets = buffers[0].cast("i").tolist()
        data = bytes(buffers[1])
        if kind == UTF8:
            values = [data[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(length)]
        else:
            values = [data[offsets[i]:offsets[i + 1]] for i in range(length)]
    else:
        values = buffers[0][:length * WIDTH[kind]].cast(FIXED[kind]).tolist()
        if kind in TIMES:
            scale = TIMES[kind]
            if scale is None:
                values = [EPOCH + datetime.timedelta(microseconds=v // 1000) for v in values]
            else:
                values = [EPOCH + datetime.timedelta(microseconds=v * scale) for v in values]
        elif kind == DATE32:
            values = [datetime.date.fromordinal(EPOCH_ORDINAL + v) for v in values]
    if validity is not None:
        for i, ok in enumerate(valid_bits(validity, length)):
            if not ok:
                values[i] = None
    return values


_pa = None


def pyarrow():
    global _pa
    if _pa is None:
        try:
            import pyarrow as pa
        except ImportError as e:
            raise Failure(E_DEFINITION,
                          f"vectorized Python functions need pyarrow, and {sys.executable} cannot import it ({e}); "
                          "install it there (pip install pyarrow) or point EDDY_PYTHON at a Python that has it")
        _pa = pa
    return _pa


def arrow_type(kind):
    pa = pyarrow()
    return {BOOL: pa.bool_(), I8: pa.int8(), I16: pa.int16(), I32: pa.int32(), I64: pa.int64(),
            F32: pa.float32(), F64: pa.float64(), UTF8: pa.string(), BINARY: pa.binary(),
            TS_S: pa.timestamp("s"), TS_MS: pa.timestamp("ms"), TS_US: pa.timestamp("us"),
            TS_NS: pa.timestamp("ns"), DATE32: pa.date32(), U8: pa.uint8(), U16: pa.uint16(),
            U32: pa.uint32(), U64: pa.uint64()}[kind]


def to_arrow(column):
    """A column as a pyarrow array over the received bytes (no copy)."""
    pa = pyarrow()
    kind, length, nulls, validity, buffers = column
    bufs = [pa.py_buffer(validity) if validity is not None else None]
    bufs += [pa.py_buffer(b) for b in buffers]
    return pa.Array.from_buffers(arrow_type(kind), length, bufs, null_count=nulls)


# ---------------------------------------------------------------- writing

class Writer:
    def __init__(self, op):
        self.parts = [bytes([op])]
        self.size = 1

    def raw(self, data):
        self.parts.append(data)
        self.size += len(data)

    def u8(self, value):
        self.raw(bytes([value]))

    def u32(self, value):
        self.raw(struct.pack("<I", value))

    def u64(self, value):
        self.raw(struct.pack("<Q", value))

    def align(self):
        pad = (-self.size) & 7
        if pad:
            self.raw(b"\0" * pad)

    def buffer(self, data):
        self.align()
        data = memoryview(data).cast("B") if data is not None else b""
        self.u64(len(data))
        if len(data):
            self.raw(data)

    def column(self, kind, length, nulls, validity, buffers):
        self.align()
        self.u8(kind)
        self.raw(b"\0" * 7)
        self.u64(length)
        self.u64(nulls)
        self.buffer(validity if nulls else None)
        for b in buffers:
            self.buffer(b)

    def errors(self, errors):
        """The rows that raised: count, then each row and its message."""
        self.align()
        self.u32(len(errors))
        for row, message in errors:
            text = message.encode("utf-8", "replace")
            self.u64(row)
            self.u32(len(text))
            self.raw(text)

    def send(self, out):
        out.write(struct.pack("<Q", self.size))
        for part in self.parts:
            out.write(part)
        out.flush()


def describe(value):
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def from_python(kind, values, name):
    """Encodes Python values as a column of `kind`: (length, nulls, validity, buffers)."""
    length = len(values)
    validity = bytearray((length + 7) // 8)
    nulls = 0
    for i, v in enumerate(values):
        if v is None:
            nulls += 1
        else:
            validity[i >> 3] |= 1 << (i & 7)

    def wrong(i, v, why=""):
        raise Failure(E_RETURN,
                      f"{name} returned {describe(v)} for row {i}, where {SQL_NAMES[kind]} was declared{why}")

    if kind == BOOL:
        bits = bytearray((length + 7) // 8)
        for i, v in enumerate(values):
            if v is None:
                continue
            if not isinstance(v, bool):
                wrong(i, v)
            if v:
                bits[i >> 3] |= 1 << (i & 7)
        return length, nulls, validity, [bits]
    if kind in (UTF8, BINARY):
        offsets = array("i", [0]) * (length + 1)
        chunks = []
        end = 0
        for i, v in enumerate(values):
            if v is not None:
                if kind == UTF8:
                    if not isinstance(v, str):
                        wrong(i, v)
                    v = v.encode("utf-8")
                elif not isinstance(v, (bytes, bytearray, memoryview)):
                    wrong(i, v)
                chunks.append(v)
                end += len(v)
            offsets[i + 1] = end
        if end > 0x7FFFFFFF:
            raise Failure(E_RETURN, f"{name} returned more than 2 GiB of text in one batch")
        return length, nulls, validity, [offsets, b"".join(chunks)]
    if kind in TIMES:
        scale = TIMES[kind]
        ints = []
        for i, v in enumerate(values):
            if v is None:
                ints.append(0)
            elif isinstance(v, datetime.datetime):
                if v.tzinfo is not None:
                    v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
                delta = v - EPOCH
                micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
                ints.append(micros * 1000 if scale is None else micros // scale)
            else:
                wrong(i, v, " (return a datetime.datetime)")
        values = ints
    elif kind == DATE32:
        days = []
        for i, v in enumerate(values):
            if v is None:
                days.append(0)
            elif isinstance(v, datetime.date) and not isinstance(v, datetime.datetime):
                days.append(v.toordinal() - EPOCH_ORDINAL)
            else:
                wrong(i, v, " (return a datetime.date)")
        values = days
    elif nulls:
        zero = 0 if kind in INTEGERS else 0.0
        values = [zero if v is None else v for v in values]
    try:
        packed = array(FIXED[kind], values)
    except (TypeError, OverflowError):
        for i, v in enumerate(values):
            try:
                array(FIXED[kind], [v])
            except OverflowError:
                wrong(i, v, " (out of range)")
            except TypeError:
                wrong(i, v)
        raise
    return length, nulls, validity, [packed]


def from_arrow(kind, result, length, name):
    """Checks a vectorized function's result and returns its buffers."""
    pa = pyarrow()
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks()
    if not isinstance(result, pa.Array):
        raise Failure(E_RETURN, f"{name} is vectorized and returned {type(result).__name__}, not a pyarrow array")
    if len(result) != length:
        raise Failure(E_RETURN, f"{name} returned {len(result)} values for {length} rows")
    expected = arrow_type(kind)
    if result.type != expected:
        both_numbers = ((pa.types.is_integer(result.type) or pa.types.is_floating(result.type))
                        and (pa.types.is_integer(expected) or pa.types.is_floating(expected)))
        both_text = pa.types.is_large_string(result.type) and expected == pa.string()
        if not (both_numbers or both_text or pa.types.is_null(result.type)):
            raise Failure(E_RETURN, f"{name} returned an array of {result.type} where "
                                    f"{SQL_NAMES[kind]} ({expected}) was declared")
        try:
            result = result.cast(expected)
        except pa.ArrowInvalid as e:
            raise Failure(E_RETURN, f"{name} returned {result.type} values that do not fit "
                                    f"{SQL_NAMES[kind]}: {e}")
    if result.offset:
        result = pa.concat_arrays([pa.array([], type=expected), result])
    buffers = result.buffers()
    validity = buffers[0]
    return length, result.null_count, validity, buffers[1:]


# ---------------------------------------------------------------- functions

class Function:
    def __init__(self, spec, config):
        self.name = spec["name"]
        self.aggregate = spec["kind"] == "aggregate"
        self.vectorized = spec["vectorized"]
        self.fail_on_error = spec["on_error"] == "fail"
        self.args = spec["args"]
        self.returns = spec["returns"]
        if self.vectorized:
            pyarrow()
        if spec.get("source") is not None:
            module_name = "eddy_udf_" + self.name
            module = types.ModuleType(module_name)
            module.__file__ = f"<function {self.name}>"
            sys.modules[module_name] = module
            try:
                source = textwrap.dedent(spec["source"]).strip("\n") + "\n"
                filename = f"<function {self.name}>"
                # Tracebacks show the body's lines.
                linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                code = compile(source, filename, "exec")
            except SyntaxError as e:
                text = (e.text or "").strip()
                raise Failure(E_DEFINITION, f"the body of {self.name} does not parse: {e.msg} "
                                            f"(File \"{filename}\", line {e.lineno}: {text})")
            try:
                exec(code, module.__dict__)
            except BaseException:
                raise Failure(E_DEFINITION, f"the body of {self.name} failed to load:\n{user_traceback()}")
            target = module.__dict__.get(self.name)
            if target is None:
                defined = sorted(k for k, v in module.__dict__.items() if callable(v) and not k.startswith("_"))
                what = "class" if self.aggregate else "function"
                raise Failure(E_DEFINITION, f"the body of {self.name} defines no {what} named {self.name}"
                                            + (f" (it defines {', '.join(defined)})" if defined else ""))
        else:
            module_name, attr = spec["module"], spec["attr"]
            try:
                module = importlib.import_module(module_name)
            except BaseException:
                raise Failure(E_DEFINITION, f"cannot import module {module_name}:\n{user_traceback()}")
            root = config.get("root")
            where = getattr(module, "__file__", None)
            if root is not None and (where is None or not os.path.realpath(where).startswith(root + os.sep)):
                raise Failure(E_DEFINITION, f"module {module_name} is not below the server's "
                                            f"function root {root} (it is {where or 'built in'})")
            target = getattr(module, attr, None)
            if target is None:
                raise Failure(E_DEFINITION, f"module {module_name} has no {attr}")
        if self.aggregate:
            for method in ("accumulate", "finish"):
                if not callable(getattr(target, method, None)):
                    raise Failure(E_DEFINITION, f"aggregate {self.name}: {target!r} has no {method} method "
                                                "(an aggregate is a class with accumulate, merge, finish and, "
                                                "to be retracted from, retract)")
        elif not callable(target):
            raise Failure(E_DEFINITION, f"{target!r} is not callable")
        self.target = target

    def raised(self, row, errors):
        message = "".join(traceback.format_exception_only(*sys.exc_info()[:2])).strip()
        if self.fail_on_error:
            raise Failure(E_RAISED, f"{self.name} raised on row {row}:\n{user_traceback()}")
        errors.append((row, message))

    def call(self, columns, length):
        errors = []
        if self.vectorized:
            arrays = [to_arrow(c) for c in columns]
            try:
                result = self.target(*arrays)
            except Failure:
                raise
            except Exception:
                raise Failure(E_RAISED, f"{self.name} raised:\n{user_traceback()}")
            return from_arrow(self.returns, result, length, self.name), errors
        rows = zip(*[to_python(c) for c in columns]) if columns else [()] * length
        out = [None] * length
        f = self.target
        for i, args in enumerate(rows):
            try:
                out[i] = f(*args)
            except Exception:
                self.raised(i, errors)
        return from_python(self.returns, out, self.name), errors

    # Aggregates keep no state here: eddy holds each group's pickled state
    # and sends the touched ones with each batch.
    def load(self, states):
        cls = self.target
        return [cls() if s is None else pickle.loads(s) for s in states]

    def dump(self, accumulators):
        values = [pickle.dumps(a, protocol=pickle.HIGHEST_PROTOCOL) for a in accumulators]
        return from_python(BINARY, values, self.name)

    def update(self, states, groups, columns, retract):
        accumulators = self.load(states)
        method = "retract" if retract else "accumulate"
        errors = []
        if retract and not callable(getattr(self.target, "retract", None)):
            raise Failure(E_DEFINITION, f"aggregate {self.name} has rows to take back, and no retract method")
        rows = zip(*[to_python(c) for c in columns]) if columns else [()] * len(groups)
        for i, (g, args) in enumerate(zip(groups, rows)):
            try:
                getattr(accumulators[g], method)(*args)
            except Exception:
                self.raised(i, errors)
        return self.dump(accumulators), errors

    def merge(self, states, groups, incoming):
        accumulators = self.load(states)
        if not callable(getattr(self.target, "merge", None)):
            raise Failure(E_DEFINITION, f"aggregate {self.name} has partial states to combine, and no merge method")
        for g, other in zip(groups, incoming):
            if other is not None:
                try:
                    accumulators[g].merge(pickle.loads(other))
                except Exception:
                    raise Failure(E_RAISED, f"{self.name}.merge raised:\n{user_traceback()}")
        return self.dump(accumulators), []

    def steps(self, states, steps, finish):
        """One group's state through accumulate/retract steps in order,
        then (`finish`) its value: what a single-group accumulator (OVER
        frames, updating aggregates) asks for in one request."""
        (accumulator,) = self.load(states)
        errors = []
        for retract, length, columns in steps:
            method = getattr(accumulator, "retract" if retract else "accumulate", None)
            if not callable(method):
                raise Failure(E_DEFINITION, f"aggregate {self.name} has rows to take back, and no retract method")
            rows = zip(*[to_python(c) for c in columns]) if columns else [()] * length
            for i, args in enumerate(rows):
                try:
                    method(*args)
                except Exception:
                    self.raised(i, errors)
        value = None
        if finish:
            try:
                value = from_python(self.returns, [accumulator.finish()], self.name)
            except Failure:
                raise
            except Exception:
                raise Failure(E_RAISED, f"{self.name}.finish raised:\n{user_traceback()}")
        return self.dump([accumulator]), value, errors

    def finish(self, states):
        values = []
        for a in self.load(states):
            try:
                values.append(a.finish())
            except Exception:
                raise Failure(E_RAISED, f"{self.name}.finish raised:\n{user_traceback()}")
        return from_python(self.returns, values, self.name), []


# ---------------------------------------------------------------- main loop

def main():
    import faulthandler
    faulthandler.enable()
    stdin = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    parent = os.getppid()

    def watch_parent():
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch_parent, daemon=True).start()

    functions = []
    config = {}

    def read_exact(n):
        data = stdin.read(n)
        if data is None or len(data) < n:
            sys.exit(0)
        return data

    while True:
        (size,) = struct.unpack("<Q", read_exact(8))
        payload = read_exact(size)
        op = payload[0]
        reader = Reader(payload)
        try:
            if op == HELLO:
                message = json.loads(bytes(reader.view[1:]).decode("utf-8"))
                if not functions:
                    config.update(message.get("config", {}))
                    for path in reversed(config.get("paths", [])):
                        sys.path.insert(0, path)
                    limit = config.get("memory_limit")
                    if limit:
                        import resource
                        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                for spec in message["functions"]:
                    try:
                        functions.append(Function(spec, config))
                    except Failure as e:
                        # eddy reads the function's name before the NUL.
                        raise Failure(e.kind, spec["name"] + "\0" + e.message)
                reply = Writer(OK)
                reply.raw(json.dumps({"functions": len(functions)}).encode())
                reply.send(out)
                continue
            index = reader.u32()
            f = functions[index]
            if op == CALL:
                ncols = reader.u32()
                length = reader.u64()
                columns = [reader.column() for _ in range(ncols)]
                column, errors = f.call(columns, length)
            elif op == AGG_UPDATE:
                retract = reader.u8() == 1
                ncols = reader.u32()
                states = to_python(reader.column())
                groups = to_python(reader.column())
                columns = [reader.column() for _ in range(ncols)]
                column, errors = f.update(states, groups, columns, retract)
            elif op == AGG_MERGE:
                states = to_python(reader.column())
                groups = to_python(reader.column())
                incoming = to_python(reader.column())
                column, errors = f.merge(states, groups, incoming)
            elif op == AGG_STEPS:
                finish = reader.u8() == 1
                count = reader.u32()
                states = to_python(reader.column())
                steps = []
                for _ in range(count):
                    retract = reader.u8() == 1
                    length = reader.u64()
                    ncols = reader.u32()
                    steps.append((retract, length, [reader.column() for _ in range(ncols)]))
                state, value, errors = f.steps(states, steps, finish)
                reply = Writer(STATES)
                reply.column(BINARY, *state)
                if value is not None:
                    reply.column(f.returns, *value)
                reply.errors(errors)
                reply.send(out)
                continue
            elif op == AGG_FINISH:
                states = to_python(reader.column())
                column, errors = f.finish(states)
            else:
                raise Failure(E_DEFINITION, f"unknown request {op}")
            reply = Writer(STATES if op in (AGG_UPDATE, AGG_MERGE) else RESULT)
            kind = BINARY if op in (AGG_UPDATE, AGG_MERGE) else f.returns
            reply.column(kind, *column)
            reply.errors(errors)
            reply.send(out)
        except Failure as e:
            reply = Writer(ERROR)
            reply.u8(e.kind)
            reply.raw(e.message.encode("utf-8", "replace"))
            reply.send(out)
        except MemoryError:
            reply = Writer(ERROR)
            reply.u8(E_RAISED)
            reply.raw(b"the worker ran out of memory (the job's memory limit)")
            reply.send(out)


main()
