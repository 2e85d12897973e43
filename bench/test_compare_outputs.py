"""Tests of bench/compare_outputs.py, the by-value check of the side-by-side
benchmarks: it must pass equal outputs written differently and fail on a
row or a value that differs. Run: python3 bench/test_compare_outputs.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare_outputs.py")


def compare(left, right, *flags):
    run = subprocess.run([sys.executable, SCRIPT, *flags, "left", left, "right", right],
                         capture_output=True, text=True)
    return run.returncode, json.loads(run.stdout) if run.stdout else None, run.stderr


class CompareOutputs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, lines):
        path = os.path.join(self.dir.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    def test_changes_replayed_to_the_same_table_are_equal(self):
        # eddy folds -U/+U into one `u` event; Flink writes `d` then `c`.
        left = self.write("eddy.out", [
            '{"before":null,"after":{"k":"a","n":1},"op":"c"}',
            '{"before":{"k":"a","n":1},"after":{"k":"a","n":2},"op":"u"}',
            '{"before":null,"after":{"k":"b","n":1},"op":"c"}',
        ])
        self.write("flink.out/part-0-0", [
            '{"before":null,"after":{"k":"b","n":1},"op":"c"}',
            '{"before":null,"after":{"k":"a","n":1},"op":"c"}',
        ])
        self.write("flink.out/part-1-0", [
            '{"before":{"k":"a","n":1},"after":null,"op":"d"}',
            '{"before":null,"after":{"k":"a","n":2},"op":"c"}',
        ])
        self.write("flink.out/.part-2-0.inprogress", ['{"before":null,"after":{"k":"z","n":9},"op":"c"}'])
        code, result, _ = compare(left, os.path.join(self.dir.name, "flink.out"))
        self.assertEqual((code, result), (0, {"left_rows": 2, "right_rows": 2, "equal": True}))

    def test_a_value_that_differs_fails_and_is_named(self):
        left = self.write("a", ['{"k":"a","n":1}', '{"k":"b","n":2}'])
        right = self.write("b", ['{"k":"a","n":1}', '{"k":"b","n":3}'])
        code, result, err = compare(left, right)
        self.assertEqual(code, 1)
        self.assertFalse(result["equal"])
        self.assertIn("('n', 2.0)", err)
        self.assertIn("('n', 3.0)", err)

    def test_a_missing_duplicate_fails(self):
        left = self.write("a", ['{"k":"a"}', '{"k":"a"}'])
        right = self.write("b", ['{"k":"a"}'])
        self.assertEqual(compare(left, right)[0], 1)

    def test_an_update_not_taken_back_fails(self):
        left = self.write("a", ['{"before":null,"after":{"k":"a","n":1},"op":"c"}',
                                '{"before":null,"after":{"k":"a","n":2},"op":"c"}'])
        right = self.write("b", ['{"k":"a","n":2}'])
        self.assertEqual(compare(left, right)[0], 1)

    def test_floats_within_tolerance_are_equal_and_beyond_it_differ(self):
        left = self.write("a", ['{"s":0.30000000000000004}', '{"s":1e12}', '{"s":5}'])
        right = self.write("b", ['{"s":1000000000000.0001}', '{"s":0.3}', '{"s":5.0}'])
        self.assertEqual(compare(left, right)[0], 0)
        right = self.write("c", ['{"s":1000000000000.0001}', '{"s":0.3001}', '{"s":5.0}'])
        self.assertEqual(compare(left, right)[0], 1)

    def test_timestamps_written_either_way_are_one_instant(self):
        left = self.write("a", ['{"t":"2024-01-01 00:00:10"}', '{"t":"2024-01-01 00:00:10.5"}'])
        right = self.write("b", ['{"t":"2024-01-01T00:00:10.500Z"}', '{"t":"2024-01-01T00:00:10.000"}'])
        self.assertEqual(compare(left, right)[0], 0)
        right = self.write("c", ['{"t":"2024-01-01T00:00:10.501Z"}', '{"t":"2024-01-01T00:00:10.000"}'])
        self.assertEqual(compare(left, right)[0], 1)

    def test_a_null_field_equals_one_left_out(self):
        left = self.write("a", ['{"k":"a","n":null}'])
        self.assertEqual(compare(left, self.write("b", ['{"k":"a"}']))[0], 0)
        self.assertEqual(compare(left, self.write("c", ['{"k":"a","n":0}']))[0], 1)

    def test_csv_under_partition_directories_compares_the_partitions_too(self):
        self.write("l/dt=2024-01-01/hm=00:00/part-0", ['1,"x, y",2024-01-01 00:00:10.000'])
        self.write("r/dt=2024-01-01/hm=00:00/part-a", ['1,"x, y",2024-01-01 00:00:10'])
        self.write("s/dt=2024-01-01/hm=00:01/part-a", ['1,"x, y",2024-01-01 00:00:10'])
        l, r, s = (os.path.join(self.dir.name, d) for d in "lrs")
        self.assertEqual(compare(l, r)[0], 0)
        self.assertEqual(compare(l, s)[0], 1)

    def test_tagged_lines_of_one_table(self):
        left = self.write("a", ['metrics> +I {"k":"a","n":1}', 'other> {"x":1}',
                                'metrics> -U {"k":"a","n":1}', 'metrics> +U {"k":"a","n":2}'])
        right = self.write("b", ['{"k":"a","n":2}'])
        self.assertEqual(compare(left, right, "--tag", "metrics")[0], 0)
        self.assertEqual(compare(left, right, "--tag", "other")[0], 1)

    def test_columns_compares_only_those(self):
        left = self.write("a", ['{"k":"a","tied":1}'])
        right = self.write("b", ['{"k":"a","tied":2}'])
        self.assertEqual(compare(left, right)[0], 1)
        self.assertEqual(compare(left, right, "--columns", "k")[0], 0)
        self.assertEqual(compare(left, self.write("c", ['{"k":"b","tied":1}']), "--columns", "k")[0], 1)

    def test_taking_away_a_row_never_added_is_an_error(self):
        left = self.write("a", ['{"before":{"k":"a"},"after":null,"op":"d"}'])
        code, result, err = compare(left, left)
        self.assertEqual((code, result), (1, None))
        self.assertIn("takes away a row it never added", err)


if __name__ == "__main__":
    unittest.main()
