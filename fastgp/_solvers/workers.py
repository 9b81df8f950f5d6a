"""A fit's work as joblib tasks on a cluster's workers, the fit's inputs sent
to each worker once (docs/design.md, "Products on a cluster"): the mechanism
that the matrix-free solver's products (:mod:`.iterative.distributed`) and
Vecchia's sums over blocks (:mod:`.vecchia.distributed`) share.

- **When.** While a joblib backend whose workers may sit on other machines
  is active (dask, ray, a custom one: :func:`tasks_on_workers`); with none,
  or loky, multiprocessing, threading or sequential, the work stays on Numba's
  threads in this process, which do the same without moving anything.
- **What travels once.** The first call of a fit sends, with each task, the
  fit's *payload*: an object holding what every task reads (the backend and
  its training inputs, Vecchia's neighbour sets), split by ``ship`` into a
  light part and its large arrays (a separate argument, which joblib's dask
  backend scatters once per call). Each worker process keeps the payload
  under the fit's token (a uuid) for the last :data:`CACHED_FITS` fits. Later
  tasks carry the token and their own small arguments; a worker that does
  not hold the token (it joined later, or restarted) answers None and its
  tasks go again with the payload.
- **The same bits.** The work is cut into tasks that are a function of the
  problem's size alone, each task's results are what the in-process
  computation gives for its part, and the caller combines them in task
  order: a cluster run gives the in-process run's bits, where the workers'
  CPUs run Numba's code as this one's does.
"""

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass

import joblib
import numpy as np
from joblib.parallel import get_active_backend

from .._engine.threads import threads_for

__all__ = ["Traffic", "TaskDispatcher", "tasks_on_workers", "worker_counts", "calls_sent",
           "CACHED_FITS"]

#: Fits whose payloads a worker process keeps (least recently used goes first).
CACHED_FITS = 4

# joblib backends whose tasks run in this process or in this machine's
# processes: Numba's threads do the same work without moving the inputs (and
# multiprocessing's pool, new for every call, would not keep them)
_LOCAL_BACKENDS = (joblib.parallel.LokyBackend, joblib.parallel.MultiprocessingBackend,
                   joblib.parallel.ThreadingBackend, joblib.parallel.SequentialBackend)


def tasks_on_workers():
    """Whether the active joblib backend sends a fit's work to its workers:
    a backend set by ``joblib.parallel_config`` (or ``parallel_backend``)
    other than those that run on this machine: loky (joblib's default),
    multiprocessing, threading and sequential."""
    backend, _ = get_active_backend()
    return (not isinstance(backend, _LOCAL_BACKENDS)
            and not getattr(backend, "uses_threads", False))


@dataclass
class Traffic:
    """What a fit handed to joblib, counted as the bytes of the arrays in
    each task's arguments and result (what a backend that pickles every
    task's arguments moves; joblib's dask backend sends each array argument
    of a call once per worker, docs/design.md).

    calls : int, calls sent to the workers
    tasks : int, joblib tasks (resent ones included)
    bytes_out : int, array bytes in the tasks' arguments
    bytes_back : int, array bytes in their results
    inputs_sent : int, tasks that carried the payload
    resent : int, tasks sent again because their worker lacked the payload
    """

    calls: int = 0
    tasks: int = 0
    bytes_out: int = 0
    bytes_back: int = 0
    inputs_sent: int = 0
    resent: int = 0


# --------------------------------------------------------------- worker side
_FITS = OrderedDict()
_FITS_LOCK = threading.Lock()
_COUNTS = {"tasks": 0, "inputs_received": 0}


def worker_counts():
    """This process's tasks run and payloads received (a dict); for
    ``distributed.Client.run`` in tests and benchmarks."""
    with _FITS_LOCK:
        return dict(_COUNTS, fits_held=len(_FITS))


def _payload_for(token, payload):
    """The fit's payload held under ``token``, keeping ``payload`` (or None)
    under it first; None when not held."""
    with _FITS_LOCK:
        _COUNTS["tasks"] += 1
        if token not in _FITS and payload is not None:
            _COUNTS["inputs_received"] += 1
            _FITS[token] = payload
            while len(_FITS) > CACHED_FITS:
                _FITS.popitem(last=False)
        held = _FITS.get(token)
        if held is not None:
            _FITS.move_to_end(token)
        return held


def _run_task(token, light, arrays, receive, method, *args):
    """One task: ``method`` of the fit's payload with ``args``, on the cores
    of this worker's machine that are idle; None when this process does not
    hold the payload and none came with the task. ``light`` and ``arrays``
    are the payload as ``ship`` split it, joined by ``receive(light,
    arrays)``."""
    payload = None if light is None else receive(light, arrays)
    held = _payload_for(token, payload)
    if held is None:
        return None
    with threads_for(held.n_samples) as governor:
        return governor.evaluate(getattr(held, method),
                                 *[_writeable(a) if isinstance(a, np.ndarray) else a
                                   for a in args])


def _writeable(a):
    """``a`` as the compiled passes were compiled for: a received array may
    be read-only (a buffer from the network), which Numba would compile
    again for (fastgp._backend.covariance.kernel_input); copied only then."""
    return np.require(a, requirements=["C_CONTIGUOUS", "WRITEABLE"])


def _array_bytes(values):
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


# --------------------------------------------------------------- caller side
_SENT = threading.local()


def calls_sent():
    """How many calls this Python thread has sent to joblib's workers
    (:meth:`TaskDispatcher.map`). Their processes compile or load fastgp's
    routines and receive the fit's inputs on a fit's first call, and this
    process cannot time that: a fit's clock (:mod:`fastgp._fit.clock`)
    reads this count to tell an evaluation that may hold it."""
    return getattr(_SENT, "count", 0)


class TaskDispatcher:
    """One fit's calls to its payload's methods as joblib tasks (module
    docstring).

    Parameters
    ----------
    payload : object with ``n_samples`` and the methods tasks call
    ship : callable payload -> (light, arrays), the payload split for
        sending: ``light`` pickles small, ``arrays`` is a tuple of arrays
    receive : callable (light, arrays) -> payload, in the worker (a module
        function, so that it pickles by name)

    Attributes
    ----------
    token : str, names this fit's payload in the workers
    traffic : Traffic, counted since construction
    """

    def __init__(self, payload, ship, receive):
        self.payload = payload
        self.ship = ship
        self.receive = receive
        self.token = uuid.uuid4().hex
        self.traffic = Traffic()
        self._inputs_sent = False

    def __getstate__(self):
        state = dict(self.__dict__)
        state["traffic"] = Traffic()
        state["_inputs_sent"] = False  # the unpickled fit may meet other workers
        return state

    def map(self, method, calls):
        """``method(*call)`` of the fit's payload for each call, as joblib
        tasks; results in call order. Every call's arrays are passed as
        themselves (one object for all tasks), so joblib's dask backend
        scatters each once per call."""
        self.traffic.calls += 1
        _SENT.count = calls_sent() + 1
        with_inputs = not self._inputs_sent
        results = self._dispatch(method, calls, with_inputs)
        missed = [i for i, r in enumerate(results) if r is None]
        if missed:  # workers that do not hold this fit's payload
            again = self._dispatch(method, [calls[i] for i in missed], True)
            self.traffic.resent += len(missed)
            for i, r in zip(missed, again):
                if r is None:
                    raise RuntimeError("a joblib worker lost fastgp's fit between "
                                       "receiving and using it")
                results[i] = r
        self._inputs_sent = True
        return results

    def _dispatch(self, method, calls, with_inputs):
        light, arrays = self.ship(self.payload) if with_inputs else (None, None)
        _, n_jobs = get_active_backend()
        results = joblib.Parallel(n_jobs=-1 if n_jobs is None else n_jobs, batch_size=1)(
            joblib.delayed(_run_task)(self.token, light, arrays, self.receive, method, *call)
            for call in calls)
        t = self.traffic
        t.tasks += len(calls)
        t.inputs_sent += len(calls) if with_inputs else 0
        t.bytes_out += sum(_array_bytes(call) for call in calls)
        t.bytes_out += len(calls) * (_array_bytes(arrays) if with_inputs else 0)
        t.bytes_back += sum(_array_bytes(r if isinstance(r, tuple) else [r])
                            for r in results)
        return results
