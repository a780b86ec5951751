"""The playground at `/` in real headless Chromium against a real server and real engines."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, Request, Route, expect

from tests.helpers.audio import decode_audio
from tests.helpers.browser import chromium
from tests.helpers.server import RunningServer, running_server
from tests.helpers.settings import make_settings

pytestmark = [pytest.mark.slow, pytest.mark.browser]


# A stable place for the screenshot of a real synthesis (bench/results/ is not committed;
# docs/playground.png is a copy of it).
SCREENSHOT = Path(__file__).parents[2] / "bench" / "results" / "playground.png"

TEXT = (
    "Hello from speechgate! This voice runs on a local engine. "
    "You hear it while it is still being synthesized."
)

NOTHING_YET = "\u2013"  # what a figure shows before there is one

# The page answers from the server within this, on a busy 2-core machine (actions and
# `expect` both retry until then; neither sleeps longer than it has to).
TIMEOUT_MS = 60_000
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="module")
def browser_context() -> Iterator[BrowserContext]:
    """One browser context for the module: each test opens its own page in it (a new context
    costs a second of CPU more than a new page), and leaves its origin's storage empty."""
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 860}, locale="en-US")
        yield context
        context.close()


def open_page(context: BrowserContext, url: str) -> Iterator[Page]:
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{url}/")
    # The voice list is filled from the server once the models are known.
    expect(page.locator("#voice option")).not_to_have_count(0)
    try:
        yield page
    finally:
        # The saved API key lives in the origin's storage, shared by the context's pages: the
        # next test's page starts without one, as in a browser of its own.
        page.evaluate("localStorage.clear()")
        page.close()
    assert not errors, errors


@pytest.fixture
def page(browser_context: BrowserContext, server: RunningServer) -> Iterator[Page]:
    yield from open_page(browser_context, server.url)


def player_wav(page: Page) -> bytes:
    """The audio the page's player holds, fetched from its blob URL inside the page."""
    encoded = page.evaluate(
        """async () => {
            const blob = await (await fetch(document.getElementById("player").src)).blob();
            const bytes = new Uint8Array(await blob.arrayBuffer());
            let binary = "";
            for (const byte of bytes) binary += String.fromCharCode(byte);
            return btoa(binary);
        }"""
    )
    return base64.b64decode(encoded)


def test_speak_streams_plays_and_reports_first_audio(page: Page) -> None:
    page.select_option("#model", "piper")
    page.fill("#text", TEXT)
    page.click("#speak")

    expect(page.locator("#ttfa")).to_have_text(re.compile(r"^\d+ ms$"))
    page.wait_for_function("document.getElementById('player').duration > 0")
    expect(page.locator("#speak-state")).to_have_text("Done.")
    expect(page.locator("#rtf")).to_have_text(re.compile(r"^\d+(\.\d)?\u00d7$"))
    expect(page.locator("#ttfa-server")).to_have_text(re.compile(r"^server \d+ ms$"))
    expect(page.locator("#speak-error")).to_be_hidden()

    duration = page.evaluate("document.getElementById('player').duration")
    assert duration > 2.0  # three sentences
    # It streamed: several pieces, the first long before the last.
    data = page.locator("#player")
    assert int(data.get_attribute("data-deltas") or 0) >= 2
    first = float(data.get_attribute("data-first-audio-ms") or "nan")
    assert 0 < first < float(data.get_attribute("data-stream-ms") or 0)
    audio = decode_audio(player_wav(page), "wav")
    assert audio.sample_rate == 24000
    assert audio.duration == pytest.approx(duration, abs=0.01)
    assert audio.rms > 0.01

    # The operator view counts the request; then the screenshot shows the page as used.
    expect(page.locator("#live-requests")).not_to_have_text(re.compile(rf"^[{NOTHING_YET}0]$"))
    expect(page.locator("#chart rect")).not_to_have_count(0)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_download_in_a_compressed_format(page: Page) -> None:
    page.select_option("#model", "espeak")
    page.fill("#text", "Download me.")
    page.click("#speak")
    expect(page.locator("#download")).to_be_enabled()
    page.select_option("#format", "mp3")
    with page.expect_download() as download:
        page.click("#download")
    path = download.value.path()
    assert download.value.suggested_filename == "speechgate.mp3"
    audio = decode_audio(Path(path).read_bytes(), "mp3")
    assert audio.duration > 0.3
    assert audio.rms > 0.01


def test_speak_at_once_after_picking_a_model_sends_one_of_its_voices(
    page: Page, server: RunningServer
) -> None:
    # Picking a model loads its voices; a Speak clicked meanwhile must not send the voice the
    # last model's list had selected. The voice list is held back until Speak was clicked.
    held: list[Route] = []
    page.route(re.compile(r"/v1/audio/voices\?model=espeak$"), lambda route: held.append(route))
    assert page.input_value("#model") == "piper"
    page.select_option("#model", "espeak")
    while not held:
        page.wait_for_timeout(20)
    page.fill("#text", "Right away.")
    with page.expect_request(re.compile(r"/v1/audio/speech$")) as sent:
        page.click("#speak")
        held[0].continue_()
    listed = httpx.get(f"{server.url}/v1/audio/voices", params={"model": "espeak"}, timeout=30)
    assert sent.value.post_data_json["voice"] in {voice["id"] for voice in listed.json()["voices"]}
    expect(page.locator("#speak-state")).to_have_text("Done.")
    expect(page.locator("#speak-error")).to_be_hidden()


def test_empty_text_shows_the_servers_error(page: Page) -> None:
    page.fill("#text", "")
    page.click("#speak")
    error = page.locator("#speak-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("Error 400.")
    expect(error).to_contain_text("(field: input)")
    expect(page.locator("#ttfa")).to_have_text(NOTHING_YET)
    expect(page.locator("#download")).to_be_disabled()


def test_live_view_shows_every_worker(page: Page, server: RunningServer) -> None:
    for engine in ("piper", "espeak"):
        workers = page.locator(f'#engines .engine[data-engine="{engine}"] .worker')
        expect(workers).to_have_count(2)  # make_settings: 2 workers per engine
        # Live ones; the view refreshes itself if one was still restarting after another test.
        expect(workers.filter(has_text=re.compile(r"^(idle|busy)$"))).to_have_count(2)
    expect(page.locator("#live-ready")).to_have_text("ready")
    expect(page.locator('#engines .engine[data-engine="piper"] .meta')).to_contain_text("queue 0")


def test_api_key_is_kept_and_sent_as_bearer(page: Page, server: RunningServer) -> None:
    page.fill("#api-key", "sk-sg-test")
    page.click("#key-form button[type=submit]")
    expect(page.locator("#key-state")).to_have_text("key saved in this browser")
    with page.expect_request(re.compile(r"/v1/status$")) as sent:
        page.reload()
    assert sent.value.headers["authorization"] == "Bearer sk-sg-test"
    expect(page.locator("#api-key")).to_have_value("sk-sg-test")

    page.click("#key-clear")
    with page.expect_request(re.compile(r"/v1/status$")) as sent:
        page.reload()
    assert "authorization" not in sent.value.headers


def test_a_401_is_shown_with_what_to_do(page: Page) -> None:
    # Auth is not on in this server; the browser answers the speech request the way a server
    # with keys on does (OpenAI's envelope), to check what the page makes of it.
    def unauthorized(route: Route) -> None:
        body = {
            "error": {
                "message": "Incorrect API key provided.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
        route.fulfill(status=401, content_type="application/json", body=json.dumps(body))

    page.route("**/v1/audio/speech", unauthorized)
    page.click("#speak")
    error = page.locator("#speak-error")
    expect(error).to_contain_text("Unauthorized (401).")
    expect(error).to_contain_text("Incorrect API key provided.")
    expect(error).to_contain_text("Enter a valid API key")


def test_usage_for_the_key_is_shown_when_the_server_reports_it(page: Page) -> None:
    # This server has no keys; the browser answers `GET /v1/usage` as a server with keys on
    # does (issue 6's report: `{"start", "end", "total", "lines"}`), to check the panel.
    total = {
        "model": "*",
        "provider": "*",
        "requests": 12,
        "errors": 1,
        "aborted": 0,
        "characters": 4321,
        "audio_seconds": 280.5,
        "cost_usd": 0.0,
        "cost_per_1k_characters_usd": 0.0,
        "reference_costs_usd": {"OpenAI tts-1": 0.064815},
    }
    report = {"start": "2026-11-01T00:00:00", "end": "2026-11-30T00:00:00", "total": total}
    page.route(
        "**/v1/usage?*",
        lambda route: route.fulfill(content_type="application/json", body=json.dumps(report)),
    )
    usage = page.locator("#usage")
    expect(usage).to_be_hidden()  # no key, no usage
    page.fill("#api-key", "sk-sg-test")
    page.click("#key-form button[type=submit]")
    expect(usage).to_be_visible()
    expect(usage).to_contain_text("4,321")
    expect(usage).to_contain_text("280.5 s")
    requests = usage.locator("div").filter(has=page.locator("dt", has_text="Requests"))
    expect(requests.locator("dd")).to_have_text("12")
    expect(requests.locator("small")).to_have_text("1 failed")
    expect(usage).to_contain_text("At OpenAI tts-1$0.0648")


def test_no_cloning_panel_without_a_model_that_clones(page: Page) -> None:
    expect(page.locator("#clone-card")).to_be_hidden()


ADMIN_KEY = "sk-admin-playground-0123456789abcdefghij"
HUB_VOICES = ["en_US-lessac-medium", "de_DE-thorsten-medium"]


@pytest.fixture(scope="module")
def admin_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """Piper and pocket-tts (the tiny random-weight model, which can clone), one worker each,
    with the admin API on, pulling from a fake hub on loopback: the cloning and the Voices
    card's tests share it (cloned voices are kept in the store, pulled ones in the models
    folder). Without pocket-tts, Piper alone: the cloning tests skip, the Voices card's runs."""
    from tests.helpers.hub import fake_hub, publish_piper_voices

    engines: list[str] = ["piper"]
    options: dict[str, dict[str, str]] = {}
    if find_spec("pocket_tts") is not None:
        from tests.helpers.pocket import build_tiny_model

        model = build_tiny_model(tmp_path_factory.mktemp("pocket-model"))
        engines.append("pocket")
        options["pocket"] = {"config": str(model / "config.yaml"), "eos_threshold": "1e9"}
    with fake_hub() as hub:
        publish_piper_voices(hub, HUB_VOICES)
        settings = make_settings(
            engines=engines,
            pool={"workers": 1},
            engine_options=options,
            auth={"admin_key": ADMIN_KEY},
            hub={"endpoint": hub.url},
            data_dir=tmp_path_factory.mktemp("data"),
        )
        with running_server(settings) as server:
            yield server


@pytest.fixture
def cloning_page(browser_context: BrowserContext, admin_server: RunningServer) -> Iterator[Page]:
    pytest.importorskip("pocket_tts")
    yield from open_page(browser_context, admin_server.url)


def test_clone_a_voice_from_a_clip_and_speak_with_it(
    cloning_page: Page, admin_server: RunningServer, tmp_path: Path
) -> None:
    page = cloning_page
    clip = httpx.post(
        f"{admin_server.url}/v1/audio/speech",
        json={"model": "piper", "voice": "alloy", "input": TEXT, "response_format": "wav"},
        timeout=60,
    )
    clip.raise_for_status()
    (tmp_path / "clip.wav").write_bytes(clip.content)

    expect(page.locator("#clone-card")).to_be_visible()
    expect(page.locator("#clone-hint")).to_contain_text("new voice for pocket")
    page.select_option("#model", "pocket")
    page.fill("#clone-name", "playground-voice")
    page.set_input_files("#clone-file", str(tmp_path / "clip.wav"))
    page.click("#clone")
    expect(page.locator("#clone-state")).to_contain_text("Created \u201cplayground-voice\u201d")
    expect(page.locator("#clone-error")).to_be_hidden()
    # Listed by the server, and selected for the model it speaks on.
    expect(page.locator("#model")).to_have_value("pocket")
    expect(page.locator("#voice option:checked")).to_have_text("playground-voice \u00b7 cloned")
    voice_id = page.locator("#voice").input_value()
    assert voice_id.startswith("voice_")
    listed = httpx.get(f"{admin_server.url}/v1/audio/voices?model=pocket", timeout=10).json()
    assert voice_id in {voice["id"] for voice in listed["voices"]}

    page.fill("#text", "Spoken in the cloned voice.")
    page.click("#speak")
    expect(page.locator("#ttfa")).to_have_text(re.compile(r"^\d+ ms$"))
    page.wait_for_function("document.getElementById('player').duration > 0")
    expect(page.locator("#speak-error")).to_be_hidden()
    audio = decode_audio(player_wav(page), "wav")
    assert audio.duration > 0.5
    assert audio.rms > 0.001
    page.screenshot(path=str(SCREENSHOT.with_name("playground-cloning.png")), full_page=True)


def test_a_recording_is_sent_as_openais_voice_upload(cloning_page: Page) -> None:
    """Records from Chromium's fake microphone and posts it to `POST /v1/audio/voices` in
    OpenAI's multipart shape; the page then shows what the server answered."""
    page = cloning_page
    sent: list[tuple[Request, bytes | None]] = []

    def look(route: Route) -> None:
        # The body is readable here (not on the finished request); it goes on to the server.
        if route.request.method == "POST":
            sent.append((route.request, route.request.post_data_buffer))
        route.continue_()

    page.route("**/v1/audio/voices", look)
    page.select_option("#model", "pocket")
    page.click("#record")
    expect(page.locator("#clone-state")).to_contain_text("Recording\u2026 1 s")
    page.click("#record")
    expect(page.locator("#clone-preview")).to_be_visible()
    page.fill("#clone-name", "microphone")
    with page.expect_response(
        lambda response: (
            response.url.endswith("/v1/audio/voices") and response.request.method == "POST"
        )
    ) as answered:
        page.click("#clone")
    answer = answered.value
    [(request, body)] = sent
    assert request.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert body is not None
    assert b'name="name"\r\n\r\nmicrophone\r\n' in body
    assert b'name="model"\r\n\r\npocket\r\n' in body
    assert b'name="audio_sample"; filename="recording.webm"' in body
    assert b"webm" in body  # the recording's own container header
    if answer.ok:
        expect(page.locator("#clone-state")).to_contain_text("Created")
    else:
        # About a second of Chromium's fake microphone beeps: too little speech to clone.
        expect(page.locator("#clone-error")).to_contain_text(answer.json()["error"]["message"])


def test_no_voices_card_without_the_admin_api(page: Page) -> None:
    # This server has no admin key: the search answers 404, and the card stays hidden.
    with page.expect_response(re.compile(r"/v1/admin/voices/search")) as answered:
        page.reload()
    assert answered.value.status == 404
    expect(page.locator("#voices-card")).to_be_hidden()


def test_search_and_pull_a_voice_then_pick_it(
    browser_context: BrowserContext, admin_server: RunningServer
) -> None:
    for page in open_page(browser_context, admin_server.url):
        card = page.locator("#voices-card")
        # No key yet: the admin API answers 401, and the card says which key it needs.
        expect(card).to_be_visible()
        expect(page.locator("#voices-hint")).to_be_visible()
        expect(page.locator("#voices-form")).to_be_hidden()

        page.fill("#api-key", ADMIN_KEY)
        page.click("#key-form button[type=submit]")
        rows = page.locator("#voices-list .pullable")
        expect(rows.filter(has_text="en_US-lessac-medium")).to_have_count(1)
        expect(page.locator("#voices-hint")).to_be_hidden()

        # Filtered by language on the server (`?language=de`).
        with page.expect_request(re.compile(r"/v1/admin/voices/search\?language=de$")):
            page.select_option("#voices-language", "de")
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text("de_DE-thorsten-medium")
        page.select_option("#voices-language", "en-US")
        lessac = rows.filter(has_text="en_US-lessac-medium")
        expect(rows).to_have_count(1)
        expect(lessac).to_contain_text("en-US · medium")
        expect(lessac).to_contain_text("MB")
        expect(page.locator("#voice option", has_text="lessac")).to_have_count(0)

        lessac.get_by_role("button", name="Pull").click()
        expect(lessac.get_by_role("button")).to_have_text("Installed")
        expect(page.locator("#voices-error")).to_be_hidden()
        bar = lessac.get_by_role("progressbar")
        expect(bar).to_be_visible()
        expect(bar).to_have_attribute("aria-valuenow", "100")
        assert int(lessac.get_attribute("data-progress-events") or 0) >= 1
        # The new voice is in the voice select at once, selected, with its language and quality.
        expect(page.locator("#model")).to_have_value("piper")
        expect(page.locator("#voice")).to_have_value("en_US-lessac-medium")
        expect(page.locator("#voice option:checked")).to_have_text(
            "en_US-lessac-medium \u00b7 en-US \u00b7 medium"
        )

        # Searched again, the server says what is installed.
        page.select_option("#voices-language", "")
        expect(rows).to_have_count(2)
        expect(page.locator("#voices-state")).to_have_text("2 found, 1 installed.")
        expect(rows.filter(has_text="en_US-lessac-medium").get_by_role("button")).to_have_text(
            "Installed"
        )
        expect(rows.filter(has_text="de_DE-thorsten-medium").get_by_role("button")).to_have_text(
            "Pull"
        )
        card.screenshot(path=str(SCREENSHOT.with_name("playground-voices.png")))
