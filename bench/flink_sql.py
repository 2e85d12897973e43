"""Runs SQL files on Apache Flink 1.20 (PyFlink Table API, streaming mode, a
local MiniCluster) for the side-by-side benchmarks (bench/flink.sh,
bench/nexmark_flink.sh): the same files eddy runs, statement by statement,
with `${NAME}` and `${NAME:default}` replaced from the command line.

    python flink_sql.py check [NAME=VALUE | flink:KEY=VALUE]... -- FILE.sql...
        Runs the files' INSERT once, into the sink they declare (the
        caller's check gives them a file sink; bench/lib.sh check_values).
    python flink_sql.py serve [NAME=VALUE | flink:KEY=VALUE]... -- FILE.sql...
        Plans the statements, then runs the INSERT once for every `run` line
        read from stdin, in the same JVM (so the first run is cold and the
        later ones warm), printing one JSON line per run: the job's net
        runtime as Flink reports it (JVM start and planning left out), and
        the wall and CPU time the JVM used from the job's submission to its
        end (every thread: tasks, JIT compiler, garbage collector), and the
        JVM's peak resident memory during that job (`peak_kib`: VmHWM,
        reset as the job is submitted through /proc/PID/clear_refs, so it is
        that job's peak, not the JVM's lifetime high-water mark). `peak`
        prints the JVM's lifetime peak (VmHWM). With FLINK_LOG_DIR set, a
        run also reports the checkpoints its job completed, counted in the
        JVM's log. End of input ends it.

    python flink_sql.py live [NAME=VALUE | flink:KEY=VALUE]... -- FILE.sql...
        Submits the INSERT, prints `running JOB_ID` on stderr once the job
        is running, and waits for it: a job over an unbounded source runs
        until the process is stopped (bench/kafka_flink.sh).

`flink:KEY=VALUE` sets a Flink option (parallelism, checkpoints, mini-batch);
a file's `SET 'KEY' = 'VALUE'` statements set options too. Defaults: UTC as
the session's time zone, the hashmap state backend.
"""

import json
import os
import re
import sys
import time

from pyflink.common import JobStatus
from pyflink.table import EnvironmentSettings, TableEnvironment

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}")


def substitute(text, variables):
    def value(match):
        name, default = match.group(1), match.group(2)
        if name in variables:
            return variables[name]
        if default is not None:
            return default
        raise SystemExit(f"flink_sql.py: ${{{name}}} has no value (pass {name}=...)")

    return VARIABLE.sub(value, text)


def statements(text):
    """The text's statements: `--` comments dropped, split at `;`, quotes
    (single, and backticks) respected."""
    out, current, quote, i = [], [], None, 0
    while i < len(text):
        c = text[i]
        if quote:
            current.append(c)
            if c == quote:
                quote = None
        elif c in "'`":
            quote = c
            current.append(c)
        elif text.startswith("--", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif c == ";":
            out.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    out.append("".join(current).strip())
    return [s for s in out if s]


def jvm_pids():
    """The JVM: this process's children."""
    pids = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids += f.read().split()
        except OSError:
            pass
    return pids


def cpu_seconds(pids):
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total / ticks


def completed_checkpoints(job_id):
    """Checkpoints the job completed, as the JVM's log (in FLINK_LOG_DIR)
    records them; None without a log directory."""
    directory = os.environ.get("FLINK_LOG_DIR")
    if not directory:
        return None
    count = 0
    for name in os.listdir(directory):
        if name.endswith(".log"):
            with open(os.path.join(directory, name), errors="replace") as f:
                count += sum(1 for line in f if "Completed checkpoint" in line and f"for job {job_id}" in line)
    return count


def reset_peak(pids):
    """Starts each process's peak resident memory (VmHWM) afresh from its
    current size (Linux: writing 5 to /proc/PID/clear_refs)."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def peak_kib(pids):
    peak = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
    return peak


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[0] not in ("check", "serve", "live") or "--" not in args:
        raise SystemExit(__doc__)
    mode, split = args[0], args.index("--")
    variables, options = {}, {"table.local-time-zone": "UTC", "state.backend.type": "hashmap"}
    for arg in args[1:split]:
        name, value = arg.split("=", 1)
        if name.startswith("flink:"):
            options[name[len("flink:"):]] = value
        else:
            variables[name] = value
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    for key, value in options.items():
        config.set(key, value)

    texts = []
    for path in args[split + 1:]:
        with open(path) as f:
            texts.append(substitute(f.read(), variables))
    inserts = []
    for statement in statements("\n;\n".join(texts)):
        set_option = re.fullmatch(r"SET\s+'([^']+)'\s*=\s*'([^']*)'", statement, re.I)
        if set_option:
            config.set(set_option.group(1), set_option.group(2))
        elif statement.upper().startswith("INSERT"):
            inserts.append(statement)
        else:
            env.execute_sql(statement)
    if len(inserts) != 1:
        raise SystemExit(f"flink_sql.py: {len(inserts)} INSERT statements, not one")

    if mode == "check":
        env.execute_sql(inserts[0]).wait()
        return
    if mode == "live":
        job = env.execute_sql(inserts[0]).get_job_client()
        while job.get_job_status().result() != JobStatus.RUNNING:
            time.sleep(0.05)
        print(f"running {job.get_job_id()}", file=sys.stderr, flush=True)
        job.get_job_execution_result().result()
        return
    for line in sys.stdin:
        command = line.strip()
        if command == "run":
            pids = jvm_pids()
            reset_peak(pids)
            # execute_sql returns once the job is submitted to its
            # MiniCluster (started for it): CPU and wall time count from
            # there to the job's end.
            result = env.execute_sql(inserts[0])
            cpu_before, wall_before = cpu_seconds(pids), time.monotonic()
            job = result.get_job_client()
            net_ms = job.get_job_execution_result().result().get_net_runtime()
            report = {
                "net_seconds": net_ms / 1000.0,
                "wall_seconds": time.monotonic() - wall_before,
                "cpu_seconds": cpu_seconds(pids) - cpu_before,
                "peak_kib": peak_kib(pids),
                "checkpoints": completed_checkpoints(str(job.get_job_id())),
            }
        elif command == "peak":
            report = {"peak_kib": peak_kib(jvm_pids())}
        else:
            raise SystemExit(f"flink_sql.py: unknown command {command!r}")
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
