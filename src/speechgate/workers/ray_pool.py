"""A pool backend on Ray Serve: each engine is a deployment of `EngineReplica`s.

Ray places, restarts and scales the replicas; the gateway keeps the local pool's contract
(`PoolBackend`): one job per replica, refusal by predicted wait over this gateway's jobs or
when Serve's queue is full, streaming through a Serve handle, cancellation when the consumer
leaves, `WorkerLost` when a replica dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Hashable, Iterator
from typing import Any

import ray
from ray import serve
from ray.exceptions import RayActorError, RayTaskError
from ray.serve.exceptions import (
    BackPressureError,
    DeploymentUnavailableError,
    ReplicaUnavailableError,
)

from speechgate import tracing
from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineConfig, EngineInfo, SynthesisRequest
from speechgate.errors import (
    EngineFailed,
    NotReady,
    QueueFull,
    QueueStalled,
    SpeechgateError,
    WorkerLost,
)
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.workers.admission import ServiceTimes, predicted_start, safety_wait
from speechgate.workers.interface import PoolStats, StartupError, WorkerState
from speechgate.workers.ray_replica import EngineReplica, Started

log = logging.getLogger(__name__)

_STATES = {
    "STARTING": WorkerState.STARTING,
    "UPDATING": WorkerState.STARTING,
    "RECOVERING": WorkerState.RESTARTING,
    "PENDING_MIGRATION": WorkerState.RESTARTING,
    "RUNNING": WorkerState.IDLE,
    "STOPPING": WorkerState.STOPPED,
    "STOPPED": WorkerState.STOPPED,
}
_FAILING = {"UNHEALTHY", "DEPLOY_FAILED"}
_STATUS_PERIOD = 1.0  # seconds between reads of Serve's replica states
_SERVE_NAMESPACE = "serve"  # where Serve names its replica actors


class RayCluster:
    """This process's connection to Ray, with Serve started without its HTTP proxy: the
    gateway calls deployments through handles."""

    def __init__(self, owned: bool) -> None:
        self._owned = owned
        self._watcher: asyncio.Task[None] | None = None
        # Read in the background, so stats() never waits.
        self.status: Any = None

    @classmethod
    async def connect(cls, address: str | None) -> RayCluster:
        """Join the cluster at `address`, or start a local Ray instance when it is None."""
        owned = not ray.is_initialized()
        if owned:
            await asyncio.to_thread(
                ray.init,
                # "local": a new instance even if `ray start` runs a cluster on this machine.
                address=address or "local",
                # The dashboard takes seconds and memory to start.
                include_dashboard=None if address else False,
                logging_level=logging.WARNING,
            )
        await asyncio.to_thread(serve.start, proxy_location="Disabled")
        cluster = cls(owned)
        await cluster.refresh()
        cluster._watcher = asyncio.get_running_loop().create_task(cluster._watch())
        return cluster

    async def refresh(self) -> None:
        self.status = await asyncio.to_thread(serve.status)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(_STATUS_PERIOD)
            try:
                await self.refresh()
            except Exception:  # the controller restarting, say: keep the last view
                log.exception("could not read Ray Serve's status")

    def running(self, app: str) -> bool:
        application = self.status.applications.get(app) if self.status else None
        return application is not None and application.status == "RUNNING"

    def deployment(self, app: str, name: str) -> Any:
        application = self.status.applications.get(app) if self.status else None
        return application.deployments.get(name) if application else None

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        if self._owned:
            await asyncio.to_thread(serve.shutdown)
            await asyncio.to_thread(ray.shutdown)


class RayPool:
    """One engine as a Ray Serve deployment. Use from one event loop: `start`, `synthesize`
    or `clone`, `close`."""

    def __init__(
        self,
        config: EngineConfig,
        cluster: RayCluster,
        *,
        replicas: int,
        max_replicas: int | None,
        queue_size: int,
        max_queue_wait: float,
        job_timeout: float,
        health_check_period: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        handle: Any = None,
    ) -> None:
        """`handle`: the deployment's Serve handle, if it is already running."""
        self.config = config
        self.info: EngineInfo | None = None
        self.service_times = ServiceTimes()
        self._cluster = cluster
        self.app = f"speechgate-{config.name}"
        self._replicas = replicas
        self._max_replicas = max_replicas
        self._queue_size = queue_size
        self._max_queue_wait = max_queue_wait
        self._job_timeout = job_timeout
        self._health_check_period = health_check_period
        self._safety_wait = safety_wait(max_queue_wait, job_timeout)
        self._clock = clock
        self._handle = handle
        self._deployed = False  # by this gateway, which then deletes it when it closes
        # This gateway's jobs only: Serve's queue bound covers other gateways sharing it.
        self._waiting: dict[object, float] = {}
        self._serving: dict[object, tuple[float, float]] = {}
        self._running: list[Started] = []
        self._deaths = 0
        self._outcomes = dict.fromkeys(("completed", "cancelled", "failed", "lost"), 0)
        self._rejected = {"queue_full": 0, "predicted_wait": 0, "queue_stalled": 0}

    # --- lifecycle ---------------------------------------------------------------------------

    def _application(self) -> Any:
        scaling: dict[str, Any] = (
            {"num_replicas": self._replicas}
            if self._max_replicas is None
            else {
                "autoscaling_config": {
                    "min_replicas": self._replicas,
                    "max_replicas": self._max_replicas,
                    "target_ongoing_requests": 1,
                }
            }
        )
        deployment = serve.deployment(
            name=self.config.name,
            max_ongoing_requests=1,
            max_queued_requests=self._queue_size,
            ray_actor_options={"num_cpus": self.config.threads},
            health_check_period_s=self._health_check_period,
            # A stopping replica waits this long before looking for jobs, even with none.
            graceful_shutdown_wait_loop_s=0.1,
            logging_config={"enable_access_log": False},
            **scaling,
        )(EngineReplica)
        return deployment.bind(self.config)

    async def start(self) -> EngineInfo:
        """Deploy the engine and wait for its replicas, or use those another gateway deployed."""
        try:
            await self._cluster.refresh()
            if self._cluster.running(self.app):
                # Redeploying could replace replicas under other gateways' jobs.
                self._handle = await asyncio.to_thread(serve.get_app_handle, self.app)
                log.info("using the %s replicas another gateway deployed", self.config.name)
            else:
                self._deployed = True  # deleted again by close() below if it fails
                self._handle = await asyncio.to_thread(
                    serve.run, self._application(), name=self.app, route_prefix=None
                )
            self.info = await self._handle.info.remote()
        except Exception as error:
            await self.close()
            raise StartupError(f"engine {self.config.name!r} failed to start: {error}") from error
        await self._cluster.refresh()
        assert self.info is not None
        return self.info

    async def close(self) -> None:
        """Delete the deployment if this gateway made it."""
        self._handle = None
        if not self._deployed:
            return
        self._deployed = False
        with contextlib.suppress(Exception):  # Ray already gone
            await asyncio.to_thread(serve.delete, self.app)

    # --- the operations --------------------------------------------------------------------

    async def synthesize(
        self,
        request: SynthesisRequest,
        output: OutputSpec,
        retry_key: Hashable | None = None,
        sender: Hashable = None,
    ) -> AsyncGenerator[EncodedChunk]:
        """Send the request to a replica and yield its audio as encoded. `retry_key` and
        `sender` are unused: Serve's queue decides who goes next."""
        self._check_live()
        work = len(request.text)
        trace = tracing.job({"speechgate.engine": self.config.name, "speechgate.work": work})
        try:
            self._admit(work)
        except BaseException as error:
            trace.end(error)
            raise
        loop = asyncio.get_running_loop()
        response = self._handle.options(stream=True).synthesize.remote(request, output)
        token = object()
        self._waiting[token] = work
        started: Started | None = None
        outcome: str | None = None  # how the job ended, once it reached a replica
        failure: BaseException | None = None
        try:
            try:
                first = await self._receive(response, loop.time() + self._safety_wait)
            except TimeoutError:
                self._rejected["queue_stalled"] += 1
                raise QueueStalled(self._safety_wait, self._max_queue_wait) from None
            finally:
                del self._waiting[token]
            assert isinstance(first, Started), first
            started = first
            trace.admitted()
            self._running.append(started)
            outcome = "cancelled"
            began = self._clock()
            self._serving[token] = (work, began)
            audio_seconds = 0.0
            deadline = loop.time() + self._job_timeout
            while True:
                try:
                    chunk = await self._receive(response, deadline)
                except TimeoutError:
                    await self._kill(started)
                    raise EngineFailed(
                        f"synthesis did not finish within {self._job_timeout:g} s",
                        code="job_timeout",
                    ) from None
                if chunk is None:
                    break
                assert isinstance(chunk, EncodedChunk), chunk
                audio_seconds += chunk.audio_seconds
                trace.chunk(chunk.elapsed, chunk.encoding, chunk.audio_seconds)
                yield chunk
            outcome = "completed"
            self.service_times.record(self._clock() - began, audio_seconds, work)
        except WorkerLost as error:
            outcome = "lost"  # before its first item too: the job was on the replica
            failure = error
            raise
        except EngineFailed as error:
            outcome = "lost" if error.code == "job_timeout" else "failed"
            failure = error
            raise
        except BaseException as error:
            failure = error
            raise
        finally:
            trace.end(failure)
            self._serving.pop(token, None)
            if outcome != "completed":
                # Re-raises the request's own failure, if any: nothing left to cancel then.
                with contextlib.suppress(Exception):
                    response.cancel()
            if started is not None:
                self._running.remove(started)
            if outcome is not None:
                self._outcomes[outcome] += 1

    async def clone(self, prompt: PcmChunk) -> bytes:
        """Compute a voice state on a replica, admitted like a speech job."""
        self._check_live()
        work = self.service_times.clone_work(prompt.duration)
        self._admit(work)
        loop = asyncio.get_running_loop()
        # Serve does not say when a cloning job leaves its queue: in service from the start.
        token = object()
        self._serving[token] = (work, self._clock())
        try:
            with self._translated():
                async with asyncio.timeout_at(loop.time() + self._job_timeout):
                    state: bytes = await self._handle.clone.remote(prompt)
        except TimeoutError:
            raise EngineFailed(
                f"cloning did not finish within {self._job_timeout:g} s", code="job_timeout"
            ) from None
        finally:
            del self._serving[token]
        return state

    async def _receive(self, response: Any, deadline: float) -> Started | EncodedChunk | None:
        """The stream's next item, None at its end; TimeoutError at `deadline`."""
        with self._translated():
            async with asyncio.timeout_at(deadline):
                try:
                    item: Started | EncodedChunk = await anext(response)
                except StopAsyncIteration:
                    return None
                return item

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """Ray's failures, as the errors the local pool raises for the same events."""
        try:
            yield
        except BackPressureError:
            self._rejected["queue_full"] += 1
            raise QueueFull(self._retry_after()) from None
        except DeploymentUnavailableError:
            raise NotReady(f"the {self.config.name} deployment failed; see Ray's logs") from None
        except (RayActorError, ReplicaUnavailableError):
            self._deaths += 1
            raise WorkerLost() from None
        except RayTaskError as error:
            cause = error.cause
            if isinstance(cause, SpeechgateError):
                raise cause from None
            raise EngineFailed(
                f"{self.config.name} job failed: {type(cause).__name__}: {cause}"
            ) from None

    async def _kill(self, started: Started) -> None:
        """Kill a replica stuck in a job: a thread inside an engine cannot be interrupted."""
        log.error(
            "%s replica %s: job exceeded %g s, killing it",
            self.config.name,
            started.pid,
            self._job_timeout,
        )

        def kill() -> None:
            ray.kill(ray.get_actor(started.actor_name, namespace=_SERVE_NAMESPACE))

        self._deaths += 1
        with contextlib.suppress(Exception):  # already gone
            await asyncio.to_thread(kill)

    def _check_live(self) -> None:
        # While Serve replaces a dead replica, requests wait in its queue rather than fail.
        if self._handle is None:
            raise NotReady(f"the {self.config.name} deployment is not running")

    def _predicted_wait(self) -> float:
        """Seconds until a job sent now can expect a replica, behind this gateway's jobs."""
        now = self._clock()
        times = self.service_times
        remaining = [
            max(0.0, times.duration(work) - (now - began)) for work, began in self._serving.values()
        ]
        queued = [times.duration(work) for work in self._waiting.values()]
        return predicted_start(remaining, queued, max(self._live(), len(remaining)))

    def _admit(self, work: float) -> None:
        wait = self._predicted_wait()
        if wait > self._max_queue_wait:
            self._rejected["predicted_wait"] += 1
            raise QueueFull(wait)

    def _retry_after(self) -> float:
        """Seconds until a request joining Ray's full queue can expect a replica: no less
        than a full queue's worth, as it may hold other gateways' jobs."""
        full = self.service_times.mean * (self._queue_size + 1) / max(1, self._live())
        return max(self._predicted_wait(), full)

    # --- observation ---------------------------------------------------------------------------

    def _replica_states(self) -> dict[str, int]:
        status = self._cluster.deployment(self.app, self.config.name)
        return dict(status.replica_states) if status is not None else {}

    def _live(self) -> int:
        return self._replica_states().get("RUNNING", 0)

    def stats(self) -> PoolStats:
        workers = dict.fromkeys(WorkerState, 0)
        for state, count in self._replica_states().items():
            workers[_STATES.get(state, WorkerState.STOPPED)] += count
        busy = min(len(self._running), workers[WorkerState.IDLE])
        workers[WorkerState.BUSY] += busy
        workers[WorkerState.IDLE] -= busy
        status = self._cluster.deployment(self.app, self.config.name)
        return PoolStats(
            workers=workers,
            queued=len(self._waiting),
            in_flight=len(self._running),
            live=workers[WorkerState.IDLE] + workers[WorkerState.BUSY],
            # Deaths jobs ran into; Ray replaces idle replicas silently.
            restarts=self._deaths,
            crash_looping=status is not None and status.status in _FAILING,
            jobs=dict(self._outcomes),
            rejected=dict(self._rejected),
        )

    def running_pids(self) -> list[int]:
        return [started.pid for started in self._running]
