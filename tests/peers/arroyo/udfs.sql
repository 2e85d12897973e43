-- Arroyo's test UDFs (crates/arroyo-sql-testing/src/udfs.rs at the commit
-- the queries cite), written as eddy's Python functions with the same
-- signatures and results. The runner declares them before each query that
-- calls one; the queries are as Arroyo wrote them.

-- fn double_negative(x: u64) -> i64 { -2 * (x as i64) }
CREATE FUNCTION double_negative(x BIGINT UNSIGNED) RETURNS BIGINT LANGUAGE PYTHON AS $$
def double_negative(x):
    return None if x is None else -2 * x
$$;

-- async fn async_double_negative(x: u64) -> i64 (sleeps x % 100 ms first)
CREATE FUNCTION async_double_negative(x BIGINT UNSIGNED) RETURNS BIGINT LANGUAGE PYTHON AS $$
def async_double_negative(x):
    return None if x is None else -2 * x
$$;

-- fn my_median(args: Vec<u64>) -> f64
CREATE AGGREGATE my_median(x BIGINT UNSIGNED) RETURNS DOUBLE LANGUAGE PYTHON AS $$
class my_median:
    def __init__(self): self.values = []
    def accumulate(self, x):
        if x is not None: self.values.append(x)
    def merge(self, other): self.values.extend(other.values)
    def finish(self):
        v = sorted(self.values)
        if not v: return None
        mid = len(v) // 2
        return (v[mid] + v[mid - 1]) / 2.0 if len(v) % 2 == 0 else float(v[mid])
$$;

-- fn none_udf(args: Vec<u64>) -> Option<f64> { None }
CREATE AGGREGATE none_udf(x BIGINT UNSIGNED) RETURNS DOUBLE LANGUAGE PYTHON AS $$
class none_udf:
    def __init__(self): pass
    def accumulate(self, x): pass
    def merge(self, other): pass
    def finish(self): return None
$$;

-- fn max_product(first: Vec<u64>, second: Vec<u64>) -> u64: the largest
-- product of the pairs
CREATE AGGREGATE max_product(a BIGINT UNSIGNED, b BIGINT UNSIGNED) RETURNS BIGINT UNSIGNED LANGUAGE PYTHON AS $$
class max_product:
    def __init__(self): self.best = None
    def accumulate(self, a, b):
        if a is None or b is None: return
        p = a * b
        self.best = p if self.best is None else max(self.best, p)
    def merge(self, other):
        if other.best is not None:
            self.best = other.best if self.best is None else max(self.best, other.best)
    def finish(self): return self.best
$$;
