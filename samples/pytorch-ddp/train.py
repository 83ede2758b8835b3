"""Data-parallel training with torch.nn.parallel.DistributedDataParallel over gloo (CPU).

One process per pod. Started as `python3 train.py` it joins the others with init_method="env://",
which reads MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK (the PyTorchJob operator sets them);
started by `torchrun train.py`, torchrun reads the operator's PET_* variables and sets the same
four for it.

The model is a small MLP learning a fixed random function of 16 inputs from made-up data (seeded:
every run sees the same numbers). Each rank trains on its own shard of every batch; DDP averages
the gradients over all ranks, so every rank holds the same parameters after each step.

Environment (all optional):
  STEPS             training steps (default 60)
  CHECKPOINT_DIR    where rank 0 writes checkpoints (default /checkpoints)
  CHECKPOINT_EVERY  steps between checkpoints (default 20); the last step is always written
  FAIL_RANK, FAIL_EXIT_CODE, FAIL_AT_STEP
                    the rank FAIL_RANK exits with FAIL_EXIT_CODE at step FAIL_AT_STEP, to show
                    what the operator does with an exit code (0 done; 1-127 the job fails;
                    128-255 the pod is created again)
  FAIL_ONCE_FILE    with FAIL_RANK: fail only if this file does not exist yet, creating it first
                    (on a volume that outlives the pod, e.g. a hostPath: the rank fails once)
  RAISE_RANK, RAISE_AT_STEP
                    the rank RAISE_RANK raises an exception at step RAISE_AT_STEP (default 1), as
                    a bug in a trainer would: Python prints the traceback and exits 1 (the job
                    fails); the other ranks lose their peer and exit 142
  HANG_RANK, HANG_AT_STEP, HANG_SECONDS
                    the rank HANG_RANK stops at step HANG_AT_STEP (default 1) and sleeps
                    HANG_SECONDS (default 3600) before going on, as a stuck trainer would; the
                    other ranks wait in their all-reduce, so the job looks Running but makes no
                    progress, which runPolicy.progressDeadlineSeconds catches. After the gloo
                    timeout (120 s) the waiting ranks give up and exit 142
  HANG_ONCE_FILE    with HANG_RANK: hang only if this file does not exist yet, creating it first
  MLKUBE_PROGRESS_URL, MLKUBE_PROGRESS_TOKEN_FILE, MLKUBE_PROGRESS_CA_FILE
                    set by the operator where it serves progress: rank 0 reports the step and the
                    loss to it (progress.py), at most once a second and at the last step

Exit codes: 0 done; 1 an error (permanent); 142 a peer went away or did not answer in time
(retryable: the operator creates the pod again and the ranks meet anew).
"""

import datetime
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from progress import Progress

EXIT_PEER_LOST = 142  # 128 + SIGALRM: retryable under the operator's ExitCode policy

INPUTS, HIDDEN, BATCH = 16, 32, 96


def env_int(name, default):
    value = os.environ.get(name, "")
    try:
        return int(value) if value != "" else default
    except ValueError:
        sys.exit(f"train.py: {name}={value!r} is not a whole number")


def say(rank, text):
    print(f"rank {rank}: {text}", flush=True)


def synthetic_data(steps):
    """The same inputs and targets on every rank: a seeded generator, a fixed random teacher."""
    g = torch.Generator().manual_seed(1234)
    teacher = torch.randn(INPUTS, 1, generator=g)
    x = torch.randn(steps, BATCH, INPUTS, generator=g)
    y = torch.tanh(x @ teacher) + 0.01 * torch.randn(steps, BATCH, 1, generator=g)
    return x, y


def fault(rank, step):
    """FAIL_*: whether this rank is to exit now, and with which code."""
    if os.environ.get("FAIL_RANK", "") == "" or env_int("FAIL_RANK", -1) != rank:
        return None
    if env_int("FAIL_AT_STEP", 1) != step:
        return None
    once = os.environ.get("FAIL_ONCE_FILE", "")
    if once:
        if os.path.exists(once):
            say(rank, f"step {step}: {once} exists, so no failure this time")
            return None
        with open(once, "w") as f:
            f.write(f"rank {rank} failed at step {step}\n")
    return env_int("FAIL_EXIT_CODE", 1)


def hang(rank, step):
    """HANG_*: how many seconds this rank is to hang now, or None."""
    if os.environ.get("HANG_RANK", "") == "" or env_int("HANG_RANK", -1) != rank:
        return None
    if env_int("HANG_AT_STEP", 1) != step:
        return None
    once = os.environ.get("HANG_ONCE_FILE", "")
    if once:
        if os.path.exists(once):
            say(rank, f"step {step}: {once} exists, so no hang this time")
            return None
        with open(once, "w") as f:
            f.write(f"rank {rank} hung at step {step}\n")
    return env_int("HANG_SECONDS", 3600)


def raises(rank, step):
    """RAISE_*: whether this rank is to raise an exception now."""
    return (os.environ.get("RAISE_RANK", "") != "" and env_int("RAISE_RANK", -1) == rank
            and env_int("RAISE_AT_STEP", 1) == step)


def checkpoint(rank, directory, step, model, optimizer, loss):
    """Writes the step's model and optimizer state where a reader never sees half a file."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"step-{step:06d}.pt")
    state = {"step": step, "loss": loss, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)
    back = torch.load(path)
    if back["step"] != step:
        raise RuntimeError(f"{path} reads back step {back['step']}, not {step}")
    say(rank, f"step {step}: checkpoint {path} ({os.path.getsize(path)} bytes)")


def main():
    torch.set_num_threads(1)
    launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "env://"
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK") if v not in os.environ]
    if missing:
        sys.exit(f"train.py: {', '.join(missing)} not set: run it in a PyTorchJob, or under torchrun")
    steps = env_int("STEPS", 60)
    every = env_int("CHECKPOINT_EVERY", 20)
    directory = os.environ.get("CHECKPOINT_DIR", "/checkpoints")

    # A peer that never comes, or goes away, ends a wait after this long instead of forever.
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    say(rank, f"joined {world} ranks via {launcher} at {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} "
              f"(torch {torch.__version__}, backend {dist.get_backend()})")

    torch.manual_seed(0)  # the same initial model everywhere (DDP also sends rank 0's to all)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(INPUTS, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.MSELoss()
    x, y = synthetic_data(steps)
    progress = Progress(warn=lambda text: say(rank, text))  # does nothing without MLKUBE_PROGRESS_URL

    for step in range(1, steps + 1):
        code = fault(rank, step)
        if code is not None:
            say(rank, f"step {step}: exiting with code {code} on purpose (FAIL_RANK={rank})")
            sys.stdout.flush()
            os._exit(code)
        if raises(rank, step):
            # Not a RuntimeError: the handler at the bottom lets it through, a traceback and exit 1.
            raise ValueError(f"rank {rank}: step {step}: loss went NaN on purpose (RAISE_RANK={rank})")
        seconds = hang(rank, step)
        if seconds is not None:
            say(rank, f"step {step}: hanging for {seconds} s on purpose (HANG_RANK={rank}); the other ranks wait for it")
            time.sleep(seconds)
            say(rank, f"step {step}: done hanging, going on")
        # This rank's shard of the step's batch.
        xs, ys = x[step - 1][rank::world], y[step - 1][rank::world]
        optimizer.zero_grad()
        loss = loss_fn(model(xs), ys)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        # The mean loss over all ranks, the same number on each.
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean = mean.item() / world
        say(rank, f"step {step} loss {mean:.6f}")
        if rank == 0:
            progress.report(step, total_steps=steps, final=step == steps, loss=mean)
        if rank == 0 and (step % every == 0 or step == steps):
            checkpoint(rank, directory, step, model.module, optimizer, mean)

    # Every rank holds the same parameters: DDP kept them in step. Their digest shows it.
    flat = torch.cat([p.detach().reshape(-1) for p in model.module.parameters()])
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]
    say(rank, f"done: {steps} steps, parameters {digest}")
    dist.barrier()
    # Past the barrier every rank is done. Leave without tearing the process group down: under
    # torchrun, Debian's torch 1.13 can block rank 0 in destroy_process_group() for ever once the
    # other ranks have gone (seen in e2e: its agent never reached torchrun's exit barrier, and
    # the job never ended). The sockets close with the process.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        # gloo's words for a peer gone (connection closed or reset) or silent past the timeout.
        text = str(e)
        if any(w in text for w in ("Connection closed", "Connection reset", "Timed out", "timed out", "Broken pipe", "ECONNRESET", "EPIPE")):
            print(f"train.py: a peer went away ({text.splitlines()[0]}); exiting {EXIT_PEER_LOST} so the operator starts the ranks again",
                  flush=True)
            sys.exit(EXIT_PEER_LOST)
        raise
