// figure.mjs -- what a view exports (no DOM): the maps shown as a figure (its layout and an SVG text),
// their numbers as CSV, and the file names. The view's export bar (view.mjs) turns them into files.
//
// An export is {title: string[] (lines naming the model, the input, the layer and heads), heads, vmax, data}
// where heads are [{label, tokens, map: [query][key], off, keyTokens?}] in the order shown (keyTokens: the
// column labels of a map that is not square) and data is the JSON.

import { colourOf, divergingOf, greyOf, headViewLayout } from "./layout.mjs";
import { t } from "./i18n.mjs";

/**
 * The colour of cell (q, k) of `head` on the scale 0 .. vmax: viridis; grey for a head turned off (`off`); the
 * signed scale -vmax .. vmax for a head with `signed` (the steps view's matrices); #bbb where `blocked[q][k]` is
 * set (a masked score). A head's own `vmax` wins over the figure's.
 */
export function cellColour(head, q, k, vmax) {
  if (head.blocked?.[q][k]) return [187, 187, 187];
  const top = head.vmax || vmax;
  const colour = head.off ? greyOf : head.signed ? divergingOf : colourOf;
  return colour(head.map[q][k], top);
}

/** A figure of more cells than this (heads x L x L) has each map drawn as one image, not a rectangle a cell. */
export const SVG_RECT_CELLS = 50_000;

/**
 * Where everything goes in an exported figure: title lines on top, then the maps in rows, each with its label.
 * @param {number} count     maps
 * @param {number} length    tokens of the longest map (L)
 * @param {number} lines     title lines
 * @returns {{columns, side, gap, pad, titleHeight, labelHeight, width, height, at: (i) => {x, y}}}  px
 */
export function figureLayout(count, length, lines) {
  if (!(count >= 1) || !(length >= 1)) throw new Error(`figureLayout needs maps and tokens, got ${count}, ${length}`);
  const columns = Math.min(count, count > 8 ? 6 : 4);
  const side = Math.min(480, Math.max(120, 6 * length)); // at least 6 px a cell up to 80 tokens
  const gap = 16;
  const pad = 16;
  const titleHeight = 18 * lines + 8;
  const labelHeight = 18;
  const rows = Math.ceil(count / columns);
  const width = 2 * pad + columns * side + (columns - 1) * gap;
  const height = 2 * pad + titleHeight + rows * (side + labelHeight) + (rows - 1) * gap;
  const at = (i) => ({ x: pad + (i % columns) * (side + gap),
    y: pad + titleHeight + Math.floor(i / columns) * (side + labelHeight + gap) });
  return { columns, side, gap, pad, titleHeight, labelHeight, width, height, at };
}

/**
 * `text` safe inside an XML element or attribute: & < > " ' escaped (a reader's text stays text), and the
 * control characters that XML 1.0 forbids (a pasted form feed or vertical tab) dropped.
 */
export function escapeXml(text) {
  // eslint-disable-next-line no-control-regex
  // biome-ignore lint/suspicious/noControlCharactersInRegex: it removes the control characters XML 1.0 forbids
  return String(text).replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

/**
 * The figure as an SVG document: title and labels as text; each map's cells as rectangles, or, past
 * SVG_RECT_CELLS cells in all, as the PNG `imageOf(head)` gives (a data: URL; the caller draws it).
 * @param {{title: string[], heads: object[], vmax: number}} figure
 * @param {(head) => string} imageOf  a data:image/png URL of the head's L x L cells
 * @returns {string}
 */
export function figureSvg(figure, imageOf) {
  const { title, heads, vmax } = figure;
  const length = Math.max(...heads.map((h) => Math.max(h.tokens.length, (h.keyTokens || h.tokens).length)));
  const f = figureLayout(heads.length, length, title.length);
  const rects = heads.reduce((sum, h) => sum + h.map.length * h.map[0].length, 0) <= SVG_RECT_CELLS;
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${f.width}" height="${f.height}" ` +
    `viewBox="0 0 ${f.width} ${f.height}" font-family="sans-serif">`,
  `<rect width="${f.width}" height="${f.height}" fill="#fff"/>`];
  title.forEach((line, i) => out.push(`<text x="${f.pad}" y="${f.pad + 14 + 18 * i}" font-size="${i ? 12 : 14}" ` +
    `fill="#222">${escapeXml(line)}</text>`));
  heads.forEach((head, i) => {
    const { x, y } = f.at(i);
    const n = head.map.length;
    const m = head.map[0].length;
    const cell = f.side / Math.max(n, m); // square cells; a map that is not square fills one side
    out.push(`<g transform="translate(${x} ${y})">`);
    if (rects) {
      for (let q = 0; q < n; q++) {
        for (let k = 0; k < m; k++) {
          const [r, g, b] = cellColour(head, q, k, vmax);
          out.push(`<rect x="${+(k * cell).toFixed(3)}" y="${+(q * cell).toFixed(3)}" width="${+cell.toFixed(3)}" ` +
            `height="${+cell.toFixed(3)}" fill="rgb(${r},${g},${b})"/>`);
        }
      }
    } else {
      out.push(`<image width="${+(cell * m).toFixed(3)}" height="${+(cell * n).toFixed(3)}" preserveAspectRatio="none" ` +
        `style="image-rendering:pixelated" href="${escapeXml(imageOf(head))}"/>`);
    }
    out.push(`<text x="0" y="${f.side + 14}" font-size="12" fill="#222">${escapeXml(head.off ? t("{label} (off)", { label: head.label }) : head.label)}</text>`);
    out.push("</g>");
  });
  out.push("</svg>");
  return out.join("\n");
}

/**
 * One CSV field (RFC 4180): quoted when it holds a comma, quote or line break. A field that a
 * spreadsheet would read as a formula (starting with =, +, -, an at sign, a tab or a carriage return) gets a
 * leading apostrophe, so that a token such as "=1+1" is shown, never computed.
 */
export function csvField(value) {
  let text = String(value);
  if (typeof value === "string" && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * The numbers of the maps shown, one row per cell: head, query and key positions and tokens, weight.
 * @param {{heads: object[], columns?: string[]}} figure  columns: a figure of other matrices than maps names its own
 * @returns {string} CSV (UTF-8 with a byte-order mark) with a header row, lines ending in \n
 */
export function figureCsv(figure) {
  // a figure of other matrices than maps names its own columns (the steps view: stage, row, column, value)
  const header = figure.columns || ["head", "off", "query", "key", "query_token", "key_token", "weight"];
  const rows = [header.map(csvField).join(",")];
  for (const head of figure.heads) {
    head.map.forEach((row, q) => row.forEach((w, k) => {
      const keys = head.keyTokens || head.tokens;
      // the number as it is (a negative value of a signed matrix is no formula: csvField would quote it)
      rows.push([...[head.label, head.off ? 1 : 0, q, k, head.tokens[q], keys[k]].map(csvField), w.toFixed(6)].join(","));
    }));
  }
  return `\uFEFF${rows.join("\n")}\n`; // the byte-order mark: spreadsheets read the tokens as UTF-8
}

/** A file name from the parts (model, view, layer...): letters, digits, dots and dashes only. */
export function fileName(parts, extension) {
  const stem = parts.map((p) => String(p).replace(/[^A-Za-z0-9.]+/g, "-").replace(/^-+|-+$/g, "")).filter((p) => p).join("_");
  return `${stem.slice(0, 120) || "maps"}.${extension}`;
}

/** A label's width in an exported figure, px, without a canvas to measure it: 7 px a character of 12 px type. */
export function labelWidthOf(labels) {
  return 7 * Math.max(1, ...labels.map((x) => String(x).length));
}

/**
 * A head view (lines between tokens, a colour per head) as an SVG document: the title, a key of the heads shown,
 * the queries on the left and the keys on the right, and for each head a line from query i to key j with
 * opacity = weight. Only query `figure.query`'s lines where it is a number (the token the reader picked).
 * @param {{title: string[], tokens: string[], heads: {label, colour, map}[], query: number|null}} figure
 * @returns {string}
 */
export function headViewSvg(figure) {
  const { title, tokens, heads } = figure;
  const labels = tokens.map((x) => String(x));
  const f = headViewLayout(tokens.length, 560, labelWidthOf(labels));
  const pad = 16;
  const keyHeight = 18 * Math.ceil(heads.length / 6);
  const top = pad + 18 * title.length + 8 + keyHeight + 8;
  const width = f.width + 2 * pad;
  const height = top + f.height + pad;
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
    `viewBox="0 0 ${width} ${height}" font-family="sans-serif">`, `<rect width="${width}" height="${height}" fill="#fff"/>`];
  title.forEach((line, i) => out.push(`<text x="${pad}" y="${pad + 14 + 18 * i}" font-size="${i ? 12 : 14}" ` +
    `fill="#222">${escapeXml(line)}</text>`));
  heads.forEach((head, i) => {
    const x = pad + (i % 6) * 90;
    const y = pad + 18 * title.length + 8 + 18 * Math.floor(i / 6);
    out.push(`<rect x="${x}" y="${y}" width="12" height="12" fill="${escapeXml(head.colour)}"/>`,
      `<text x="${x + 16}" y="${y + 11}" font-size="12" fill="#222">${escapeXml(head.label)}</text>`);
  });
  out.push(`<g transform="translate(${pad} ${top})">`);
  for (const head of heads) {
    head.map.forEach((row, q) => {
      if (typeof figure.query === "number" && q !== figure.query) return;
      row.forEach((w, k) => {
        if (!(w > 0.005)) return; // invisible at this opacity: left out, as on the page
        out.push(`<line x1="${f.left}" y1="${+f.y(q).toFixed(2)}" x2="${f.right}" y2="${+f.y(k).toFixed(2)}" ` +
          `stroke="${escapeXml(head.colour)}" stroke-width="2" stroke-opacity="${+Math.min(1, w).toFixed(3)}"/>`);
      });
    });
  }
  labels.forEach((label, i) => {
    const y = +(f.y(i) + 4).toFixed(2);
    const bold = figure.query === i ? ' font-weight="bold"' : "";
    out.push(`<text x="${f.left - 6}" y="${y}" font-size="12" text-anchor="end" fill="#222"${bold}>${escapeXml(label)}</text>`,
      `<text x="${f.right + 6}" y="${y}" font-size="12" fill="#222">${escapeXml(label)}</text>`);
  });
  out.push("</g>", "</svg>");
  return out.join("\n");
}
