"""Runs the tasks of a grading run as one Slurm job array (./grade --slurm).

One array task per grading task: array task i runs ``argv_prefix + [str(i)]`` (the driver passes
``["./grade", "--run-task", "RESULTS/.tasks.json"]``), so every task writes its own files and the driver
merges them by reading RESULTS/ afterwards (docs of the interfaces: issue 13's grade spec).

Python standard library only; run with /usr/bin/python3. Needs Slurm's client (sbatch) on PATH and a
cluster that SLURM_CONF (or /etc/slurm/slurm.conf) names; tools/slurm/start_slurm.sh starts a private
one-node cluster for tests and CI.
"""

import os
import shlex
import shutil
import signal
import subprocess

# The name sbatch shows for the array in squeue.
JOB_NAME = "tpsp-grade"


class SlurmError(RuntimeError):
    """Slurm cannot run the array: sbatch is missing, or it refused the submission (the message
    holds sbatch's own words and the command)."""


def task_exit_file(log_dir, index):
    """The file in which array task ``index`` records its command's exit status (decimal text)."""
    return os.path.join(log_dir, f"task-{index}.exit")


def task_log_files(log_dir, index):
    """(stdout path, stderr path) of array task ``index`` in ``log_dir``."""
    return (os.path.join(log_dir, f"task-{index}.out"), os.path.join(log_dir, f"task-{index}.err"))


def _time_limit(seconds):
    """sbatch's --time value "D-HH:MM:SS" for ``seconds`` (Slurm enforces whole minutes: it rounds
    up)."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def _check_args(argv_prefix, n_tasks, workdir, log_dir, cpus_per_task, time_limit_s, max_parallel):
    """Raises ValueError naming the rule and the value for any argument run_array cannot use."""
    if not isinstance(argv_prefix, (list, tuple)) or not argv_prefix or not all(
        isinstance(a, str) for a in argv_prefix
    ):
        raise ValueError(f"argv_prefix={argv_prefix!r} must be a non-empty list of strings")
    for name, value in (("n_tasks", n_tasks), ("cpus_per_task", cpus_per_task), ("time_limit_s", time_limit_s)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r} must be an integer >= 1")
    if max_parallel is not None and (not isinstance(max_parallel, int) or max_parallel < 1):
        raise ValueError(f"max_parallel={max_parallel!r} must be None or an integer >= 1")
    if not os.path.isdir(workdir):
        raise ValueError(f"workdir={workdir!r} is not a directory")
    # sbatch reads % in --output/--error as a pattern (%a, %j ...).
    if "%" in os.path.abspath(log_dir):
        raise ValueError(f"log_dir={log_dir!r} holds '%', which sbatch reads as a file-name pattern")


def _batch_script(argv_prefix, workdir, log_dir):
    """The text of the batch script every array task runs: the command with the task's index, its exit
    status recorded in task_exit_file() (so that a status slurmctld has already forgotten is kept)."""
    command = " ".join(shlex.quote(a) for a in argv_prefix)
    exit_file = shlex.quote(os.path.join(log_dir, "task-")) + '"$SLURM_ARRAY_TASK_ID.exit"'
    return (
        "#!/bin/bash\n"
        "# written by tools/grade/slurm.py run_array(): array task i runs the command with i appended\n"
        f"cd {shlex.quote(workdir)} || exit 1\n"
        f'{command} "$SLURM_ARRAY_TASK_ID"\n'
        "rc=$?\n"
        f'echo "$rc" > {exit_file}\n'
        'exit "$rc"\n'
    )


def _recorded_status(log_dir, n_tasks):
    """The highest exit status among the task_exit_file()s present (0 when none is)."""
    worst = 0
    for i in range(n_tasks):
        try:
            with open(task_exit_file(log_dir, i), encoding="ascii") as f:
                worst = max(worst, int(f.read().strip()))
        except (OSError, ValueError):
            continue
    return worst


def run_array(
    argv_prefix,
    n_tasks,
    workdir,
    log_dir,
    cpus_per_task=1,
    time_limit_s=600,
    partition=None,
    env=None,
    max_parallel=None,
):
    """Runs ``argv_prefix + [str(i)]`` for i in 0..n_tasks-1 as one Slurm job array and waits for all.

    Submits ``sbatch --wait --array=0-(n_tasks-1)[%max_parallel]`` with a batch script written to
    ``log_dir/array.sbatch``. Each array task runs in ``workdir`` with ``cpus_per_task`` CPUs and a
    wall-clock limit of ``time_limit_s`` seconds (Slurm counts whole minutes, rounding up; a task past
    it is killed and its status is non-zero). Task i's stdout and stderr go to ``log_dir/task-i.out``
    and ``log_dir/task-i.err`` (task_log_files()), and its command's exit status to
    ``log_dir/task-i.exit`` (task_exit_file()). ``workdir`` and ``log_dir`` must be on a file system
    every compute node sees; ``log_dir`` is created when missing. The tasks inherit this process's
    environment (sbatch --export=ALL) updated with ``env`` (a dict str -> str, or None).
    ``partition=None`` uses the cluster's default partition; ``max_parallel=None`` lets Slurm run as
    many tasks at once as the CPUs allow.

    Returns sbatch's exit status: 0 when every task exited 0, else the highest exit status of a task
    (1 for a task killed by a signal or its time limit). When a task's recorded exit status is higher
    than what sbatch saw (sbatch reads statuses from slurmctld, which forgets finished tasks after
    MinJobAge, 300 s by default), that one is returned. The driver still reads each task's own result
    files; this status only summarises. Blocks until the last task ends. On KeyboardInterrupt the
    array is cancelled (scancel) before the exception propagates.

    Raises ValueError for an argument it cannot use (named, with its value), SlurmError when sbatch is
    not on PATH or refuses the submission (its message included), OSError when log_dir cannot be
    written.
    """
    _check_args(argv_prefix, n_tasks, workdir, log_dir, cpus_per_task, time_limit_s, max_parallel)
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise SlurmError(
            "sbatch is not on PATH: Slurm's client is not installed here (Debian: apt-get install "
            "slurm-client, or tools/install_deps.sh --with-optional) or this is not a Slurm submit host"
        )
    workdir = os.path.abspath(workdir)
    log_dir = os.path.abspath(log_dir)
    os.makedirs(log_dir, exist_ok=True)
    for i in range(n_tasks):  # a status left by an earlier run must not count
        try:
            os.remove(task_exit_file(log_dir, i))
        except FileNotFoundError:
            pass
    script = os.path.join(log_dir, "array.sbatch")
    with open(script, "w", encoding="utf-8") as f:
        f.write(_batch_script(argv_prefix, workdir, log_dir))

    array = f"0-{n_tasks - 1}" + (f"%{max_parallel}" if max_parallel is not None else "")
    out, err = task_log_files(log_dir, "%a")
    cmd = [sbatch, "--wait", "--parsable", f"--array={array}", f"--job-name={JOB_NAME}", "--ntasks=1",
           f"--cpus-per-task={cpus_per_task}", f"--time={_time_limit(time_limit_s)}", f"--chdir={workdir}",
           f"--output={out}", f"--error={err}", "--export=ALL"]
    if partition is not None:
        cmd.append(f"--partition={partition}")
    cmd.append(script)
    task_env = dict(os.environ)
    task_env.update(env or {})

    with subprocess.Popen(cmd, env=task_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        # --parsable prints "JOBID[;CLUSTER]" as soon as the array is accepted, then waits.
        job_id = proc.stdout.readline().strip().split(";")[0]
        try:
            stdout, stderr = proc.communicate()
        except KeyboardInterrupt:
            if job_id:
                subprocess.run(["scancel", job_id], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            proc.send_signal(signal.SIGTERM)
            raise
    if not job_id:
        message = (stderr.strip() + "\n" + stdout.strip()).strip() or f"no job id printed (exit status {proc.returncode})"
        raise SlurmError(f"sbatch refused the array: {message}\ncommand: {shlex.join(cmd)}")
    return max(proc.returncode, _recorded_status(log_dir, n_tasks))
