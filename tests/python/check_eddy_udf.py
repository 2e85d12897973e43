"""Checks the eddy_udf helper package (python/eddy_udf) on pyarrow tables,
and writes the module and SQL tests/python_functions.rs runs through eddy.

Usage: check_eddy_udf.py OUT_DIR
"""

import os
import sys

import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from eddy_udf import aggregate, call, declaration, fold, scalar  # noqa: E402

out = sys.argv[1]
MODULE = '''from eddy_udf import scalar, aggregate

@scalar("qty INT", returns="BIGINT")
def tripled(qty):
    return 3 * qty

@aggregate("qty INT", returns="BIGINT")
class biggest:
    def __init__(self):
        self.value = None
    def accumulate(self, qty):
        if qty is not None and (self.value is None or qty > self.value):
            self.value = qty
    def merge(self, other):
        self.accumulate(other.value)
    def finish(self):
        return self.value
'''
os.makedirs(os.path.join(out, "udfs"), exist_ok=True)
with open(os.path.join(out, "udfs", "shop.py"), "w") as f:
    f.write(MODULE)
sys.path.insert(0, os.path.join(out, "udfs"))
import shop  # noqa: E402

table = pa.table({"qty": pa.array([3, None, 7, 1], pa.int32()), "g": ["a", "a", "b", "b"]})
assert call(shop.tripled, table, "qty").to_pylist() == [9, None, 21, 3], "row errors become NULL"
assert fold(shop.biggest, table, "qty", group_by="g", batch_rows=1) == {"a": 3, "b": 7}


@scalar("x DOUBLE", returns="DOUBLE", vectorized=True)
def halved(x):
    import pyarrow.compute as pc
    return pc.divide(x, 2.0)


assert call(halved, pa.table({"x": [1.0, None]}), "x").to_pylist() == [0.5, None]
assert declaration(halved, module="m") == \
    "CREATE FUNCTION halved(x DOUBLE) RETURNS DOUBLE LANGUAGE PYTHON WITH (vectorized = true) AS 'm:halved';"

with open(os.path.join(out, "functions.sql"), "w") as f:
    f.write(declaration(shop.tripled) + "\n" + declaration(shop.biggest) + "\n")
print("eddy_udf: checked")
