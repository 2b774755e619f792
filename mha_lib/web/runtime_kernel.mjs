// runtime_kernel.mjs -- the backend in Jupyter, Colab or VS Code: the notebook's kernel computes.
//
// mha_lib.live.LiveWidget (an anywidget) loads these modules as one (mha_lib.live.widget_esm), and
// render() (mha_live.mjs) mounts the view with kernelBackend(widget): its models' session.run sends the
// feeds to the kernel in a widget message, where mha_lib computes the outputs. The models have the
// shape of runtime_browser.mjs's, and the backend the same interface (see view.mjs).

import { WordPieceTokenizer } from "./wordpiece.mjs";
import { describeValue } from "./checks.mjs";
import { modelsText } from "./text.mjs";
import { t } from "./i18n.mjs";

/** A tensor of the kernel backend: what onnxruntime-web's Tensor holds, as feedsFor builds it. */
export class KernelTensor {
  constructor(type, data, dims) {
    this.type = type;
    this.data = data;
    this.dims = dims;
  }
}

/** Bytes of one binary buffer of a widget message (ipywidgets gives DataViews; tests may give ArrayBuffers). */
function bufferBytes(buffer) {
  if (buffer instanceof ArrayBuffer) return new Uint8Array(buffer);
  if (ArrayBuffer.isView(buffer)) return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  throw new Error(`the kernel sent a buffer of an unknown kind (${describeValue(buffer)})`);
}

/** float32 values of a buffer, little-endian (numpy's "<f4"), copied so that they are aligned. */
function floatsOf(buffer) {
  const bytes = bufferBytes(buffer);
  if (bytes.byteLength % 4) throw new Error(`the kernel sent ${bytes.byteLength} bytes, not whole float32 values`);
  const out = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

/**
 * The kernel backend: a model whose session runs in the notebook's kernel (mha_lib.live.LiveWidget).
 * `widget` is anywidget's model object: {get, set, on, off, send, save_changes}. Messages (content of
 * model.send, answered by a "msg:custom" message with the same `request`):
 *   {op: "load", request, model}  ->  {op: "loaded", request, info: {kind, num_layers, num_heads,
 *                                      max_length, inputs, outputs}, vocab: vocab.txt text or null}
 *   {op: "run", request, model, feeds: {name: {type, dims, data: plain array}}}
 *                                 ->  {op: "result", request, outputs: {name: {dims, buffer: i}}} and
 *                                      buffers[i] holding float32 values (little-endian)
 *   any failure                   ->  {op: "error", request, message}: the promise rejects with it
 * @returns {object} the backend interface of view.mjs, with kind "kernel", and close()
 */
export function kernelBackend(widget) {
  const pending = new Map(); // request -> {resolve, reject}
  const prefix = Math.random().toString(36).slice(2);
  let count = 0;
  const onMessage = (msg, buffers) => {
    if (!msg || typeof msg !== "object" || !pending.has(msg.request)) return; // another view's answer
    const { resolve, reject } = pending.get(msg.request);
    pending.delete(msg.request);
    if (msg.op === "error") reject(new Error(String(msg.message)));
    else resolve({ msg, buffers: buffers || [] });
  };
  widget.on("msg:custom", onMessage);
  const ask = (content) => new Promise((resolve, reject) => {
    count += 1;
    const request = `${prefix}-${count}`;
    pending.set(request, { resolve, reject });
    try {
      widget.send({ ...content, request });
    } catch (err) {
      pending.delete(request);
      reject(err);
    }
  });
  const models = new Map(); // one load per model id and view
  const loadFromKernel = async (id) => {
    const { msg } = await ask({ op: "load", model: id });
    const info = msg.info;
    const session = {
      inputNames: info.inputs.slice(),
      outputNames: info.outputs.slice(),
      async run(feeds) {
        const plain = {};
        for (const [name, tensor] of Object.entries(feeds)) {
          plain[name] = { type: tensor.type, dims: tensor.dims.map(Number), data: Array.from(tensor.data, Number) };
        }
        const { msg: answer, buffers } = await ask({ op: "run", model: id, feeds: plain });
        const outputs = {};
        for (const [name, o] of Object.entries(answer.outputs)) {
          const data = floatsOf(buffers[o.buffer]);
          const size = o.dims.reduce((a, b) => a * b, 1);
          if (data.length !== size) throw new Error(`the kernel's ${name} has ${data.length} values, dims [${o.dims}]`);
          outputs[name] = { data, dims: o.dims };
        }
        return outputs;
      },
    };
    const tokenizer = typeof msg.vocab === "string"
      ? WordPieceTokenizer.fromVocabText(msg.vocab, { maxLength: info.max_length || 256 }) : null;
    return { id, info, session, ort: { Tensor: KernelTensor }, tokenizer, queue: Promise.resolve(),
      prepare: async () => {} }; // the kernel has every word vector
  };
  return {
    kind: "kernel",
    timesHere: false, // a kernel's machine is timed by the chapter's own cells, not through widget messages
    get where() {
      return t("by the notebook's kernel");
    },
    get who() {
      return t("The kernel");
    },
    get madeWhen() {
      return t("the cell ran");
    },
    get privacy() {
      return t("Typed text goes to this notebook's kernel, which computes the maps with mha_lib.");
    },
    about(modelIds) {
      const ids = modelsText(modelIds);
      return { lead: modelIds.length > 1 ? t("Computed by this notebook's kernel with mha_lib (PyTorch): models {ids}.", { ids })
        : t("Computed by this notebook's kernel with mha_lib (PyTorch): model {ids}.", { ids }), parts: [] };
    },
    async firstTimeText() {
      return t("The notebook's kernel recomputes it with mha_lib.");
    },
    load(modelIds, show) {
      show.start(0, t("The kernel is loading the model…"));
      return Promise.all(modelIds.map((id) => this.loadModel(id)));
    },
    loadedText(_modelIds, seconds) {
      return t("The kernel loaded the model in {seconds} s; it computes every change.", { seconds: seconds.toFixed(1) });
    },
    loadFailedText(message) {
      return t("The kernel could not load the model ({message}).", { message });
    },
    onLoaded() {}, // nothing is downloaded: what the first action needs never changes
    loadModel(id) {
      if (!models.has(id)) {
        const promise = loadFromKernel(id);
        promise.catch(() => models.delete(id)); // "Try again" asks the kernel again
        models.set(id, promise);
      }
      return models.get(id);
    },
    close() {
      widget.off("msg:custom", onMessage);
      for (const { reject } of pending.values()) reject(new Error("the view was closed"));
      pending.clear();
    },
  };
}
