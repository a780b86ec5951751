"""Everything the server runs: one pool per engine (local workers or Ray replicas), the
catalog and the service."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from speechgate.activity import RecentRequests
from speechgate.catalog import Catalog
from speechgate.cloning.cloner import VoiceCloning
from speechgate.cloning.library import VoiceLibrary
from speechgate.dictionaries import Dictionaries
from speechgate.engines.base import EngineConfig
from speechgate.metrics import Metrics
from speechgate.service import Pull, SpeechService
from speechgate.settings import Settings
from speechgate.voices.installed import InstalledItem
from speechgate.workers.cores import SharedCores
from speechgate.workers.forking import preload_engines
from speechgate.workers.interface import Pool, StartupError
from speechgate.workers.pool import WorkerPool

if TYPE_CHECKING:
    from speechgate.workers.ray_pool import RayCluster

_log = logging.getLogger(__name__)


def engine_config(settings: Settings, name: str) -> EngineConfig:
    return EngineConfig(
        name=name,
        threads=settings.pool.cores_per_worker,
        max_threads=settings.pool.pool_cores if settings.pool.elastic_threads else 0,
        options=dict(settings.engine_options.get(name, {})),
        data_dir=str(settings.data_dir / "engines" / name),
        models_dir=str(settings.models_dir),
        loaded_voices=settings.pool.loaded_voices,
    )


async def _connect_ray(settings: Settings) -> RayCluster:
    try:
        from speechgate.workers.ray_pool import RayCluster
    except ImportError as error:
        raise StartupError(
            f"backend 'ray' needs Ray Serve: pip install 'speechgate[ray]' ({error})"
        ) from None
    return await RayCluster.connect(settings.ray.address)


def _pools(settings: Settings, cluster: RayCluster | None) -> dict[str, Pool]:
    pool = settings.pool
    if cluster is None:
        preload_engines(settings.engines)
        shared_cores = SharedCores()
        return {
            name: WorkerPool(
                engine_config(settings, name),
                pool.worker_count,
                queue_size=pool.queue_size,
                max_queue_wait=pool.max_queue_wait,
                job_timeout=pool.job_timeout,
                slow_reader_timeout=pool.slow_reader_timeout,
                jobs_per_worker=pool.jobs_per_worker,
                max_retry_after=pool.max_retry_after,
                stall_timeout=pool.stall_timeout,
                cores=pool.worker_cores,
                shared_cores=shared_cores,
            )
            for name in settings.engines
        }
    from speechgate.workers.ray_pool import RayPool

    return {
        name: RayPool(
            engine_config(settings, name),
            cluster,
            replicas=settings.replica_count,
            max_replicas=settings.ray.max_replicas,
            health_check_period=settings.ray.health_check_period,
            queue_size=pool.queue_size,
            max_queue_wait=pool.max_queue_wait,
            job_timeout=pool.job_timeout,
        )
        for name in settings.engines
    }


def _auto_pull(settings: Settings, refresh: Callable[[], None]) -> Pull:
    """What the service pulls a voice that is not installed with (`hub.auto_pull`)."""
    from speechgate.hub import Hub
    from speechgate.hub.autopull import autopull

    hub = Hub.from_settings(settings)

    async def pull(ref: str) -> InstalledItem:
        return await autopull(ref, models=settings.models_dir, hub=hub, refresh=refresh)

    return pull


@dataclass
class Runtime:
    settings: Settings
    pools: dict[str, Pool]
    catalog: Catalog
    service: SpeechService
    voices: VoiceCloning
    recent: RecentRequests  # what the live operator view draws
    cluster: RayCluster | None = None

    @classmethod
    async def start(
        cls,
        settings: Settings,
        metrics: Metrics | None = None,
        dictionaries: Dictionaries | None = None,
    ) -> Runtime:
        """Start every engine's pool; raises StartupError if an engine cannot load.
        `dictionaries`: the lexicons requests are read with (None: none)."""
        cluster = await _connect_ray(settings) if settings.pool.backend == "ray" else None
        pools = _pools(settings, cluster)
        try:
            infos = await asyncio.gather(*(pool.start() for pool in pools.values()))
        except BaseException:
            await asyncio.gather(*(pool.close() for pool in pools.values()))
            if cluster is not None:
                await cluster.close()
            raise
        catalog = Catalog(
            {info.name: info for info in infos},
            settings.resolved_model_aliases(),
            settings.voice_aliases,
            settings.models_dir,
        )
        if metrics is not None:
            metrics.watch(pools)
        library = await asyncio.to_thread(VoiceLibrary, settings.voices_dir)
        voices = VoiceCloning(
            catalog,
            pools,
            library,
            settings.cloning.min_speech_seconds,
            max_decodes=settings.cloning.max_decodes,
        )
        recent = RecentRequests()
        service = SpeechService(
            settings,
            catalog,
            pools,
            metrics,
            voices=voices,
            recent=recent,
            dictionaries=dictionaries,
            pull=_auto_pull(settings, lambda: runtime.refresh_installed())
            if settings.hub.auto_pull
            else None,
        )
        voices.on_delete.append(lambda voice: service.forget_voice(voice.id))
        # Built after the service it holds; the pull above reaches it only once a request runs.
        runtime = cls(settings, pools, catalog, service, voices, recent, cluster)
        if settings.phrase_cache.persist:
            loaded = await service.load_phrases()
            _log.info("phrase cache: %d phrases read from disk", loaded)
        if settings.phrase_cache.preload:
            model = settings.default_engine or next(iter(catalog.engines))
            kept = await service.preload(
                settings.phrase_cache.preload, settings.phrase_cache.preload_voices, model
            )
            _log.info("phrase cache: %d phrases preloaded", kept)
        return runtime

    def refresh_installed(self) -> None:
        """Make voices installed (or removed) since start-up known to the catalog: call after
        a pull. Cheap (reads one small manifest per installed item) and safe while requests are
        served; the workers find a new voice's files themselves."""
        self.catalog.refresh()

    async def close(self) -> None:
        await asyncio.gather(*(pool.close() for pool in self.pools.values()))
        if self.cluster is not None:
            await self.cluster.close()

    def engine_states(self) -> dict[str, dict[str, Any]]:
        """Each engine's workers by state, queue, restarts and whether it is live."""
        engines = {}
        for name, pool in self.pools.items():
            stats = pool.stats()
            engines[name] = {
                "workers": {state.value: count for state, count in stats.workers.items() if count},
                "queued": stats.queued,
                "restarts": stats.restarts,
                "crash_looping": stats.crash_looping,
                "live": stats.live,
            }
        return engines

    @property
    def ready(self) -> bool:
        """Every engine has a worker that can take a job."""
        return all(pool.stats().live for pool in self.pools.values())
