"""How pytest-xdist's controller hands the tests out (tests/conftest.py)."""

from xdist.scheduler import LoadScopeScheduling

from tests.helpers import pocket_modules


class PocketModulesTogether(LoadScopeScheduling):
    """`--dist loadscope`: a test process is given whole modules, and pocket-tts' modules
    (`pocket_modules`) as one."""

    def _split_scope(self, nodeid: str) -> str:
        if pocket_modules.runs_pocket(nodeid):
            return pocket_modules.ENGINE
        return super()._split_scope(nodeid)
