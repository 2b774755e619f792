// onnx_file.mjs -- what a model file says about itself: the metadata_props of its ONNX ModelProto, where
// mha_lib.export.export_onnx writes "mha_lib.kind", "mha_lib.vocab_size", "mha_lib.num_layers" and so on.
// onnxruntime-web does not expose a model's metadata, so the page reads the protobuf's top level itself.

/**
 * The metadata of an ONNX file: ModelProto's field 14 (repeated StringStringEntryProto {key = 1, value = 2}).
 * Only the top level is walked: the graph (field 7, most of the bytes) is skipped by its length.
 * @param {Uint8Array} bytes  the .onnx file
 * @returns {Object<string, string>}  key -> value, an object without a prototype ({} for a file without metadata)
 * @throws {Error} the bytes are not a protobuf message (a length past the end, an unknown wire type), or a key
 *   is given twice (onnx.checker refuses that too)
 */
export function onnxMetadata(bytes) {
  let i = 0;
  const varint = (end) => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      if (i >= end || shift > 63) throw new Error("not an ONNX file (a number runs past its end)");
      const b = bytes[i++];
      value += (b & 0x7f) * 2 ** shift;
      if (!(b & 0x80)) return value;
    }
  };
  const skip = (wire, end) => {
    if (wire === 0) varint(end);
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const n = varint(end); // read first: `i += varint(end)` would add to the i from before the length
      i += n;
    }
    else throw new Error(`not an ONNX file (wire type ${wire})`);
    if (i > end) throw new Error("not an ONNX file (a field runs past its end)");
  };
  const decoder = new TextDecoder("utf-8");
  const out = Object.create(null); // a key "__proto__" is a key like any other
  while (i < bytes.length) {
    const tag = varint(bytes.length);
    if (tag % 8 !== 2 || Math.floor(tag / 8) !== 14) {
      skip(tag % 8, bytes.length);
      continue;
    }
    const length = varint(bytes.length);
    const end = i + length;
    if (end > bytes.length) throw new Error("not an ONNX file (a field runs past its end)");
    let key = "";
    let value = "";
    while (i < end) {
      const inner = varint(end);
      if (inner === 10 || inner === 18) {
        const n = varint(end);
        if (i + n > end) throw new Error("not an ONNX file (a field runs past its end)");
        const text = decoder.decode(bytes.subarray(i, i + n));
        i += n;
        if (inner === 10) key = text;
        else value = text;
      } else {
        skip(inner % 8, end);
      }
    }
    if (key in out) throw new Error(`the model's metadata gives “${key}” twice`);
    out[key] = value;
  }
  return out;
}
