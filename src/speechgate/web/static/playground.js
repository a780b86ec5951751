// The speechgate playground: speak through the server's own API and watch it work.
// Plain ES module, no build step. Everything goes through the public HTTP API, so the page
// behaves exactly as any client would (auth, errors and all).

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "speechgate.apiKey";
// Playback streams 16-bit PCM over SSE at this rate and schedules it with Web Audio as it
// arrives: the only way to hear every format's first audio as soon as the server sends it.
const PCM_RATE = 24000;
const STATUS_EVERY_MS = 2000;

// --- the API ----------------------------------------------------------------------------------

function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

function headers(extra = {}) {
  const key = apiKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

class ApiError extends Error {
  constructor(status, error) {
    super(error?.message || `HTTP ${status}`);
    this.status = status;
    this.param = error?.param ?? null;
    this.code = error?.code ?? null;
  }
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not OpenAI's envelope (a proxy's page, say): the status alone has to do.
  }
  return new ApiError(response.status, body?.error ?? { message: `${response.status} ${response.statusText}` });
}

async function request(path, init = {}) {
  const response = await fetch(path, { ...init, headers: headers(init.headers) });
  if (!response.ok) throw await failure(response);
  return response;
}

const getJSON = async (path) => (await request(path)).json();

function showError(box, error, streamed = "Synthesis failed.") {
  if (!error) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.replaceChildren();
  const title = document.createElement("strong");
  if (error instanceof ApiError) {
    if (error.status === 401) title.textContent = "Unauthorized (401).";
    else if (error.status) title.textContent = `Error ${error.status}.`;
    else title.textContent = streamed; // an error event in a stream that had started
    box.append(title, " ", error.message);
    if (error.param) box.append(` (field: ${error.param})`);
    if (error.status === 401) box.append(" Enter a valid API key at the top of the page.");
  } else {
    title.textContent = "Error.";
    box.append(title, " ", String(error.message || error));
  }
  box.hidden = false;
}

// --- audio --------------------------------------------------------------------------------------

let audioContext = null;

function context() {
  audioContext ??= new AudioContext();
  if (audioContext.state === "suspended") audioContext.resume();
  return audioContext;
}

/** Plays little-endian 16-bit mono PCM gaplessly as pieces arrive, and keeps all of it. */
class PcmPlayer {
  constructor(rate) {
    this.ctx = context();
    this.rate = rate;
    this.at = 0;
    this.sources = new Set();
    this.pieces = [];
    this.samples = 0;
    this.odd = null; // a byte left over when a piece split a sample
  }

  push(bytes) {
    if (this.odd !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this.odd;
      joined.set(bytes, 1);
      bytes = joined;
      this.odd = null;
    }
    if (bytes.length % 2) {
      this.odd = bytes[bytes.length - 1];
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    const count = bytes.length / 2;
    if (!count) return;
    this.pieces.push(bytes);
    this.samples += count;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    const buffer = this.ctx.createBuffer(1, count, this.rate);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < count; i++) channel[i] = view.getInt16(2 * i, true) / 32768;
    const source = this.ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(this.ctx.destination);
    // A little lead time, so a piece that arrives just late still starts cleanly.
    this.at = Math.max(this.at, this.ctx.currentTime + 0.05);
    source.start(this.at);
    this.at += buffer.duration;
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
  }

  get seconds() {
    return this.samples / this.rate;
  }

  stop() {
    for (const source of this.sources) source.stop();
    this.sources.clear();
  }

  wav() {
    const data = this.samples * 2;
    const header = new DataView(new ArrayBuffer(44));
    const text = (offset, value) => [...value].forEach((c, i) => header.setUint8(offset + i, c.charCodeAt(0)));
    text(0, "RIFF");
    header.setUint32(4, 36 + data, true);
    text(8, "WAVE");
    text(12, "fmt ");
    header.setUint32(16, 16, true);
    header.setUint16(20, 1, true); // PCM
    header.setUint16(22, 1, true); // mono
    header.setUint32(24, this.rate, true);
    header.setUint32(28, this.rate * 2, true);
    header.setUint16(32, 2, true);
    header.setUint16(34, 16, true);
    text(36, "data");
    header.setUint32(40, data, true);
    return new Blob([header, ...this.pieces], { type: "audio/wav" });
  }

  pcm() {
    return new Blob(this.pieces, { type: "application/octet-stream" });
  }
}

function base64Bytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Yields the JSON of each `data:` event of a server-sent event stream. */
async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}

// --- models and voices ----------------------------------------------------------------------------

const state = { voices: [], voicesLoading: null, models: [], player: null, abort: null, last: null };

function option(value, label) {
  const element = document.createElement("option");
  element.value = value;
  element.textContent = label;
  return element;
}

async function loadModels() {
  const { data } = await getJSON("/v1/models");
  state.models = data;
  const select = $("model");
  const current = select.value;
  select.replaceChildren(...data.map((model) => option(model.id, model.id)));
  if (data.some((model) => model.id === current)) select.value = current;
  // The cloning panel is for servers with a model that can clone (`cloning: true`).
  const cloning = data.filter((model) => model.cloning).map((model) => model.id);
  $("clone-card").hidden = !cloning.length;
  $("clone-hint").textContent =
    `A few seconds (3 or more) of one person speaking make a new voice for ${cloning.join(", ")}.`;
}

function voiceLabel(voice) {
  if (voice.type === "audio_sample") return `${voice.name} · cloned`;
  const details = [voice.language, voice.quality].filter((detail) => detail && detail !== voice.name);
  return [voice.name, ...details].join(" · ");
}

/** Fill the voice select with the selected model's voices (`select`: the one to select). */
function loadVoices(select = null) {
  state.voicesLoading = fillVoices(select);
  return state.voicesLoading;
}

async function fillVoices(select) {
  const model = $("model").value;
  const { voices } = await getJSON(`/v1/audio/voices?model=${encodeURIComponent(model)}`);
  state.voices = voices;
  const element = $("voice");
  const current = select ?? element.value;
  element.replaceChildren(
    ...voices.map((voice) => option(voice.id, voiceLabel(voice))),
  );
  if (voices.some((voice) => voice.id === current)) element.value = current;
}

async function refreshCatalog() {
  const box = $("speak-error");
  try {
    await loadModels();
    await loadVoices();
    showError(box, null);
  } catch (error) {
    showError(box, error);
  }
}

// --- speaking -------------------------------------------------------------------------------------

function speechBody(format, stream) {
  const voice = $("voice").value;
  return {
    model: $("model").value,
    input: $("text").value,
    // Stored (cloned) voices are addressed by id, as OpenAI's custom voices are.
    voice: voice.startsWith("voice_") ? { id: voice } : voice,
    speed: Number($("speed").value),
    response_format: format,
    ...(stream ? { stream_format: "sse", sample_rate: PCM_RATE } : {}),
  };
}

function setFigure(id, text, detail = null, detailId = null) {
  $(id).textContent = text;
  if (detailId) $(detailId).textContent = detail ?? "";
}

function resetFigures() {
  for (const id of ["ttfa", "rtf", "audio-length"]) $(id).textContent = "–";
  for (const id of ["ttfa-server", "rtf-engine", "audio-usage"]) $(id).textContent = "";
}

async function speak() {
  const box = $("speak-error");
  showError(box, null);
  state.player?.stop();
  state.abort?.abort();
  const abort = (state.abort = new AbortController());
  const player = (state.player = new PcmPlayer(PCM_RATE));
  state.last = null;
  resetFigures();
  $("speak").disabled = true;
  $("stop").disabled = false;
  $("download").disabled = true;
  $("speak-state").textContent = "Synthesizing…";
  // A model picked a moment ago: until its voices are in, the voice selected is the last
  // model's, which this one would refuse.
  await state.voicesLoading?.catch(() => {});
  const body = speechBody("pcm", true);
  const started = performance.now();
  let first = null;
  let deltas = 0;
  let finished = false;
  try {
    const response = await request("/v1/audio/speech", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: abort.signal,
    });
    const serverTtfa = response.headers.get("x-speechgate-time-to-first-audio-ms");
    const engineRtf = response.headers.get("x-speechgate-real-time-factor");
    if (serverTtfa) $("ttfa-server").textContent = `server ${Number(serverTtfa).toFixed(0)} ms`;
    $("rtf-engine").textContent = engineRtf
      ? `engine ${Number(engineRtf).toFixed(1)}× recently`
      : "audio ÷ time to receive it";
    for await (const event of sseEvents(response.body)) {
      if (event.type === "speech.audio.delta") {
        player.push(base64Bytes(event.audio));
        deltas += 1;
        if (first === null) {
          first = performance.now() - started;
          setFigure("ttfa", `${first.toFixed(0)} ms`);
          $("speak-state").textContent = "Playing while it streams…";
        }
        $("audio-length").textContent = `${player.seconds.toFixed(2)} s`;
      } else if (event.type === "speech.audio.done") {
        finished = true;
        const elapsed = (performance.now() - started) / 1000;
        $("rtf").textContent = `${(player.seconds / elapsed).toFixed(1)}×`;
        $("audio-usage").textContent = `${event.usage.input_tokens} characters in`;
      } else if (event.type === "error") {
        // The response had started (200), so the failure comes as an event with no status.
        throw new ApiError(null, event.error);
      }
    }
    if (!finished) throw new Error("The stream ended before the audio was complete.");
    state.last = { player, body };
    // How the audio arrived, for anyone checking that it really streamed (the browser tests).
    Object.assign($("player").dataset, {
      deltas: String(deltas),
      firstAudioMs: first === null ? "" : first.toFixed(1),
      streamMs: (performance.now() - started).toFixed(1),
    });
    const previous = $("player").src;
    if (previous.startsWith("blob:")) URL.revokeObjectURL(previous);
    $("player").src = URL.createObjectURL(player.wav());
    $("download").disabled = false;
    $("speak-state").textContent = "Done.";
  } catch (error) {
    if (error.name === "AbortError") {
      $("speak-state").textContent = "Stopped.";
    } else {
      player.stop();
      showError(box, error);
      $("speak-state").textContent = "";
    }
  } finally {
    $("speak").disabled = false;
    $("stop").disabled = true;
    pollStatus();
  }
}

function stop() {
  state.abort?.abort();
  state.player?.stop();
}

function save(blob, extension) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `speechgate.${extension}`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

async function download() {
  const last = state.last;
  if (!last) return;
  const format = $("format").value;
  if (format === "wav") return save(last.player.wav(), "wav");
  if (format === "pcm") return save(last.player.pcm(), "pcm");
  // The browser cannot encode the compressed formats: ask the server for this one.
  $("download").disabled = true;
  $("speak-state").textContent = `Rendering ${format}…`;
  try {
    const response = await request("/v1/audio/speech", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...last.body, response_format: format, stream_format: undefined, sample_rate: undefined }),
    });
    save(await response.blob(), format);
    $("speak-state").textContent = "Downloaded.";
  } catch (error) {
    showError($("speak-error"), error);
  } finally {
    $("download").disabled = false;
  }
}

// --- the live operator view ----------------------------------------------------------------------

function engineCard(engine) {
  const card = document.createElement("div");
  card.className = "engine";
  card.dataset.engine = engine.name;
  const header = document.createElement("header");
  const title = document.createElement("span");
  title.className = "title";
  title.textContent = engine.name;
  const meta = document.createElement("span");
  meta.className = "meta";
  const rtf = engine.real_time_factor == null ? "" : ` · ${engine.real_time_factor.toFixed(1)}× real time`;
  meta.textContent = `queue ${engine.queued} · restarts ${engine.restarts}${rtf}`;
  header.append(title, meta);
  const workers = document.createElement("div");
  workers.className = "workers";
  for (const [name, count] of Object.entries(engine.workers)) {
    for (let i = 0; i < count; i++) {
      const chip = document.createElement("span");
      chip.className = `worker ${name}`;
      chip.textContent = name;
      workers.append(chip);
    }
  }
  if (engine.crash_looping) {
    const chip = document.createElement("span");
    chip.className = "worker restarting";
    chip.textContent = "crash loop";
    workers.append(chip);
  }
  card.append(header, workers);
  return card;
}

function drawChart(recent) {
  const svg = $("chart");
  const ns = "http://www.w3.org/2000/svg";
  const width = 300;
  const height = 80;
  const buckets = recent.buckets;
  const step = width / buckets.length;
  const most = Math.max(1, ...buckets.map((b) => b.audio_seconds));
  const slowest = Math.max(1, ...buckets.map((b) => b.time_to_first_audio_ms?.p50 ?? 0));
  const shapes = [];
  const points = [];
  buckets.forEach((bucket, i) => {
    if (bucket.audio_seconds > 0) {
      const bar = document.createElementNS(ns, "rect");
      const h = (bucket.audio_seconds / most) * (height - 6);
      bar.setAttribute("x", (i * step + 1).toFixed(2));
      bar.setAttribute("y", (height - h).toFixed(2));
      bar.setAttribute("width", (step - 2).toFixed(2));
      bar.setAttribute("height", h.toFixed(2));
      bar.setAttribute("class", bucket.incomplete ? "bar incomplete" : "bar");
      shapes.push(bar);
    }
    const p50 = bucket.time_to_first_audio_ms?.p50;
    if (p50 != null) points.push(`${(i * step + step / 2).toFixed(2)},${(height - (p50 / slowest) * (height - 6)).toFixed(2)}`);
  });
  if (points.length > 1) {
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", points.join(" "));
    line.setAttribute("class", "latency");
    shapes.push(line);
  }
  svg.replaceChildren(...shapes);
}

function renderStatus(status) {
  const ready = $("live-ready");
  ready.textContent = status.ready ? "ready" : "not ready";
  ready.className = `pill ${status.ready ? "ok" : "bad"}`;
  $("engines").replaceChildren(...status.engines.map(engineCard));
  const recent = status.recent;
  const minutes = recent.window_seconds / 60;
  $("live-requests").textContent = String(recent.requests);
  $("live-audio").textContent = `${(recent.audio_seconds / minutes).toFixed(1)} s`;
  $("live-incomplete").textContent = recent.incomplete ? `${recent.incomplete} incomplete` : "all complete";
  const ttfa = recent.time_to_first_audio_ms;
  $("live-ttfa").textContent = ttfa ? `${ttfa.p50.toFixed(0)} ms` : "–";
  $("live-ttfa-p95").textContent = ttfa ? `p95 ${ttfa.p95.toFixed(0)} ms` : "";
  drawChart(recent);
}

// `GET /v1/usage` (keys on): this key's totals for the month, as `{"total": {...}}`.
function usageFigures(total) {
  const figures = [
    ["Characters", total.characters.toLocaleString("en-US")],
    ["Audio", `${total.audio_seconds.toFixed(1)} s`],
    ["Requests", String(total.requests), total.errors ? `${total.errors} failed` : ""],
    ["Cost", `$${total.cost_usd.toFixed(4)}`],
  ];
  // What the same characters would have cost elsewhere, at the server's reference prices.
  for (const [name, usd] of Object.entries(total.reference_costs_usd ?? {})) {
    figures.push([`At ${name}`, `$${usd.toFixed(4)}`]);
  }
  return figures.map(([label, value, detail = ""]) => {
    const cell = document.createElement("div");
    const dt = document.createElement("dt");
    dt.textContent = label;
    const dd = document.createElement("dd");
    dd.textContent = value;
    const small = document.createElement("small");
    small.className = "muted";
    small.textContent = detail;
    cell.append(dt, dd, small);
    return cell;
  });
}

async function pollUsage() {
  const panel = $("usage");
  if (!apiKey()) {
    panel.hidden = true;
    return;
  }
  try {
    const { total } = await getJSON("/v1/usage?period=current_month");
    $("usage-figures").replaceChildren(...usageFigures(total));
    panel.hidden = false;
  } catch {
    // No usage reports here (keys off, or a server without them): nothing to show.
    panel.hidden = true;
  }
}

let polling = false;

async function pollStatus() {
  if (polling) return;
  polling = true;
  try {
    renderStatus(await getJSON("/v1/status"));
    showError($("live-error"), null);
  } catch (error) {
    showError($("live-error"), error);
  } finally {
    polling = false;
  }
  await pollUsage();
}

// --- cloning ---------------------------------------------------------------------------------

const recording = { recorder: null, blob: null, started: 0, timer: null };

function clip() {
  const file = $("clone-file").files[0];
  if (file) return { blob: file, filename: file.name };
  if (recording.blob) return { blob: recording.blob, filename: `recording.${recording.blob.type.includes("ogg") ? "ogg" : "webm"}` };
  return null;
}

async function toggleRecording() {
  const button = $("record");
  const status = $("clone-state");
  if (recording.recorder) {
    recording.recorder.stop();
    return;
  }
  showError($("clone-error"), null);
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const recorder = new MediaRecorder(stream);
    const parts = [];
    recorder.ondataavailable = (event) => parts.push(event.data);
    recorder.onstop = () => {
      stream.getTracks().forEach((track) => track.stop());
      clearInterval(recording.timer);
      recording.recorder = null;
      recording.blob = new Blob(parts, { type: recorder.mimeType });
      $("clone-file").value = "";
      const preview = $("clone-preview");
      preview.src = URL.createObjectURL(recording.blob);
      preview.hidden = false;
      button.textContent = "● Record";
      button.classList.remove("recording");
      status.textContent = `Recorded ${((performance.now() - recording.started) / 1000).toFixed(1)} s.`;
    };
    recording.recorder = recorder;
    recording.started = performance.now();
    recorder.start();
    button.textContent = "■ Stop";
    button.classList.add("recording");
    recording.timer = setInterval(() => {
      status.textContent = `Recording… ${((performance.now() - recording.started) / 1000).toFixed(0)} s`;
    }, 250);
  } catch (error) {
    showError($("clone-error"), new Error(`Cannot record from the microphone: ${error.message}`));
  }
}

async function cloneVoice() {
  const box = $("clone-error");
  showError(box, null);
  const name = $("clone-name").value.trim();
  const sample = clip();
  if (!name || !sample) {
    showError(box, new Error(!name ? "Give the voice a name." : "Choose an audio clip or record one."));
    return;
  }
  const form = new FormData();
  form.append("name", name);
  form.append("audio_sample", sample.blob, sample.filename);
  // speechgate's extension: clone for the selected model if it can, else the server picks.
  const selected = state.models.find((model) => model.id === $("model").value);
  if (selected?.cloning) form.append("model", selected.id);
  $("clone").disabled = true;
  $("clone-state").textContent = "Creating voice…";
  try {
    const voice = await (await request("/v1/audio/voices", { method: "POST", body: form })).json();
    // Show the new voice under the model that owns it.
    const { voices } = await getJSON("/v1/audio/voices");
    const listed = voices.find((v) => v.id === voice.id);
    if (listed && listed.model && [...$("model").options].some((o) => o.value === listed.model)) {
      $("model").value = listed.model;
    }
    await loadVoices(voice.id);
    $("clone-state").textContent = listed
      ? `Created “${voice.name}” (${voice.id}); it is selected above.`
      : `Created “${voice.name}” (${voice.id}).`;
  } catch (error) {
    showError(box, error);
    $("clone-state").textContent = "";
  } finally {
    $("clone").disabled = false;
  }
}

// --- voices pulled from the hub (the admin API) -----------------------------------------------

const pulls = { languages: null };

function megabytes(bytes) {
  return bytes == null ? "" : `${(bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0)} MB`;
}

/** Yields each JSON line of an NDJSON body as it arrives. */
async function* ndjsonLines(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffer += value;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 1);
      if (line) yield JSON.parse(line);
    }
    if (done) {
      if (buffer.trim()) yield JSON.parse(buffer);
      return;
    }
  }
}

function pullableRow(item) {
  const row = document.createElement("li");
  row.className = "pullable";
  row.dataset.ref = item.ref;
  const what = document.createElement("div");
  what.className = "what";
  const engine = document.createElement("span");
  engine.className = "pill";
  engine.textContent = item.engine;
  const name = document.createElement("span");
  name.className = "ref";
  name.textContent = item.name;
  const meta = document.createElement("small");
  meta.className = "muted";
  const languages = item.languages.length > 3 ? `${item.languages.length} languages` : item.languages.join(", ");
  const voices = item.voices > 1 ? `${item.voices} voices` : "";
  meta.textContent = [languages, item.quality, voices, megabytes(item.size_bytes)].filter(Boolean).join(" · ");
  what.append(engine, name, meta);
  const action = document.createElement("div");
  action.className = "action";
  const bar = document.createElement("div");
  bar.className = "bar";
  bar.setAttribute("role", "progressbar");
  bar.setAttribute("aria-valuemin", "0");
  bar.setAttribute("aria-valuemax", "100");
  bar.hidden = true;
  bar.append(document.createElement("span"));
  const button = document.createElement("button");
  button.className = "ghost";
  setInstalled(row, button, item.installed);
  button.addEventListener("click", () => pullVoice(item, row, button, bar));
  action.append(bar, button);
  row.append(what, action);
  return row;
}

function setInstalled(row, button, installed) {
  row.classList.toggle("installed", installed);
  button.textContent = installed ? "Installed" : "Pull";
  button.disabled = installed;
}

function showProgress(bar, done, total) {
  const percent = total ? Math.min(100, (100 * done) / total) : 0;
  bar.hidden = false;
  bar.firstChild.style.width = `${percent.toFixed(1)}%`;
  bar.setAttribute("aria-valuenow", percent.toFixed(0));
  bar.title = total ? `${megabytes(done)} of ${megabytes(total)}` : megabytes(done);
}

async function pullVoice(item, row, button, bar) {
  const box = $("voices-error");
  showError(box, null);
  button.disabled = true;
  button.textContent = "Pulling…";
  // Bytes per file as huggingface_hub reports them; the index's size (when it gives one)
  // keeps the bar from jumping back as each new file announces its total.
  const files = new Map();
  let events = 0;
  let size = item.size_bytes ?? 0;
  showProgress(bar, 0, size);
  try {
    const response = await request("/v1/admin/voices/pull", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ref: item.ref }),
    });
    let installed = null;
    for await (const event of ndjsonLines(response.body)) {
      if (event.type === "progress") {
        files.set(event.file, event);
        events += 1;
        let done = 0;
        let total = 0;
        for (const file of files.values()) {
          done += file.done;
          total += file.total ?? file.done;
        }
        size = Math.max(total, size);
        showProgress(bar, done, size);
        row.dataset.progressEvents = String(events);
      } else if (event.type === "installed") {
        installed = event;
      } else if (event.type === "error") {
        throw new ApiError(null, event.error);
      }
    }
    if (!installed) throw new Error("The pull ended without installing anything.");
    showProgress(bar, size, size);
    setInstalled(row, button, true);
    $("voices-state").textContent = `Installed ${installed.ref}: pick it under Voice above.`;
    await pickPulled(item.engine, installed.voices);
  } catch (error) {
    showError(box, error, "Pull failed.");
    bar.hidden = true;
    setInstalled(row, button, false);
  }
}

/** Show the new voices in the model and voice selects, the first of them selected. */
async function pickPulled(engine, voices) {
  await loadModels();
  if ([...$("model").options].some((option) => option.value === engine)) $("model").value = engine;
  await loadVoices(voices[0] ?? null);
}

async function searchVoices() {
  const card = $("voices-card");
  const language = $("voices-language").value;
  const query = language ? `?language=${encodeURIComponent(language)}` : "";
  $("voices-state").textContent = "Searching…";
  showError($("voices-error"), null);
  try {
    const found = await getJSON(`/v1/admin/voices/search${query}`);
    card.hidden = false;
    $("voices-hint").hidden = true;
    $("voices-form").hidden = false;
    if (pulls.languages === null && !language) fillLanguages(found.data);
    $("voices-list").replaceChildren(...found.data.map(pullableRow));
    const unreadable = Object.keys(found.errors);
    $("voices-unreadable").hidden = !unreadable.length;
    $("voices-unreadable").textContent = unreadable.length
      ? `Not listed: ${unreadable.join(", ")} (the hub did not answer for ${unreadable.length > 1 ? "their" : "its"} index).`
      : "";
    const installed = found.data.filter((item) => item.installed).length;
    $("voices-state").textContent = `${found.data.length} found${language ? ` for ${language}` : ""}, ${installed} installed.`;
  } catch (error) {
    $("voices-state").textContent = "";
    $("voices-list").replaceChildren();
    // 404: this server has no admin API; 401/403: it has, and the key field holds another key.
    const forbidden = error instanceof ApiError && (error.status === 401 || error.status === 403);
    card.hidden = error instanceof ApiError && error.status === 404;
    $("voices-hint").hidden = !forbidden;
    $("voices-form").hidden = forbidden;
    if (!forbidden) showError($("voices-error"), error);
  }
}

function fillLanguages(items) {
  // Primary languages ("de") first, each followed by its regions ("de-AT", "de-DE").
  const tags = new Set();
  for (const item of items) {
    for (const tag of item.languages) {
      tags.add(tag.split("-")[0]);
      tags.add(tag);
    }
  }
  pulls.languages = [...tags].sort();
  $("voices-language").replaceChildren(
    option("", "All languages"),
    ...pulls.languages.map((tag) => option(tag, tag.includes("-") ? `\u2003${tag}` : tag)),
  );
}

// --- wiring ------------------------------------------------------------------------------------

function showKeyState() {
  $("key-state").textContent = apiKey() ? "key saved in this browser" : "";
  $("api-key").value = apiKey();
}

function init() {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    if (key) localStorage.setItem(KEY_STORAGE, key);
    else localStorage.removeItem(KEY_STORAGE);
    showKeyState();
    refreshCatalog();
    pollStatus();
    searchVoices();
  });
  $("key-clear").addEventListener("click", () => {
    localStorage.removeItem(KEY_STORAGE);
    showKeyState();
    refreshCatalog();
    pollStatus();
    searchVoices();
  });
  $("voices-form").addEventListener("submit", (event) => {
    event.preventDefault();
    searchVoices();
  });
  $("voices-language").addEventListener("change", searchVoices);
  $("model").addEventListener("change", () => loadVoices().catch((error) => showError($("speak-error"), error)));
  $("speed").addEventListener("input", () => {
    $("speed-value").textContent = `${Number($("speed").value).toFixed(2)}×`;
  });
  $("speak").addEventListener("click", speak);
  $("stop").addEventListener("click", stop);
  $("download").addEventListener("click", download);
  $("record").addEventListener("click", toggleRecording);
  $("clone").addEventListener("click", cloneVoice);
  $("clone-file").addEventListener("change", () => {
    recording.blob = null;
    $("clone-preview").hidden = true;
  });
  showKeyState();
  refreshCatalog();
  pollStatus();
  searchVoices();
  setInterval(() => {
    if (!document.hidden) pollStatus();
  }, STATUS_EVERY_MS);
}

init();
