// layer_maps.mjs -- MiniLM's maps of one text, one layer or all, with the layer control: shared by the
// sentence and prune views. A head mask ([layer][head] 1 = on, 0 = off) draws the heads turned off grey.

import { HeadGrid } from "./draw.mjs";
import { largestWeight } from "./layout.mjs";
import { el, setText } from "./dom.mjs";
import { nextTask } from "./clock.mjs";
import { t } from "./i18n.mjs";

/** The layer control: a slider (aria-valuetext "layer 2 of 6") and an "all layers" switch. */
function layerControl(numLayers, start, onChange) {
  const id = `mha-live-layer-${Math.random().toString(36).slice(2)}`;
  const slider = el("input", { type: "range", id, min: "0", max: String(numLayers - 1), step: "1", value: String(start) });
  const value = el("output", { for: id });
  const all = el("input", { type: "checkbox", id: `${id}-all` });
  const describe = () => {
    const layer = Number(slider.value);
    const text = t("layer {layer} ({nth} of {count})", { layer, nth: layer + 1, count: numLayers });
    slider.setAttribute("aria-valuetext", text);
    setText(value, all.checked ? t("layers 0–{last}", { last: numLayers - 1 }) : text);
    slider.disabled = all.checked;
    return all.checked ? "all" : layer;
  };
  const update = () => onChange(describe());
  /** Another model's layer count: the slider's range follows (its value too, if past the end); no onChange. */
  const setLayers = (n) => {
    numLayers = n;
    slider.max = String(n - 1);
    if (Number(slider.value) > n - 1) slider.value = String(n - 1);
    return describe();
  };
  slider.addEventListener("input", update);
  all.addEventListener("change", update);
  const node = el("div", { class: "mha-live-controls" },
    el("label", { for: id }, t("Layer")), slider, value,
    el("label", { class: "mha-live-check" }, all, t("all layers"))); // the label is part of the box's touch target
  return { node, update, setLayers, slider, all, value };
}

/**
 * Heads of the chosen layer(s), as HeadGrid entries (with their layer and head). mask: [layer][head] 0/1 or null;
 * roles: a Map from "layer.head" to a short name written after the label ("L3.H1 · det"), or null.
 */
export function headsOf(attentions, which, mask, roles = null) {
  const layers = which === "all" ? attentions.map((_, l) => l) : [which];
  return layers.map((l) => attentions[l].map((map, h) => {
    const role = roles?.get(`${l}.${h}`);
    return { label: role ? `L${l}.H${h} · ${role}` : `L${l}.H${h}`, layer: l, head: h, map, off: !!mask && !mask[l][h] };
  }));
}

/** Whether two token lists are the same tokens. */
function sameTokens(a, b) {
  return Boolean(a && b) && a.length === b.length && a.every((x, i) => x === b[i]);
}

/** A config's roles ([{layer, head, role}]) as the Map headsOf reads, or null. */
export function rolesOf(roles) {
  return roles?.length ? new Map(roles.map((r) => [`${r.layer}.${r.head}`, r.role])) : null;
}

/**
 * Shows MiniLM's maps of one text, one layer or all. Shared by the sentence and prune views.
 *
 * A run's maps arrive one layer at a time (compute_bert.mjs: begin, then setLayer for each layer, then commit):
 * each layer's grid is drawn when its maps arrive, and only that grid (every grid again only when the colour
 * scale changes). Until the run commits, the layers not yet computed show the maps before, and the export and
 * the readout's cells belong to the maps drawn. While the run waits for the file of a layer up to the one chosen
 * (fetching(), the first runs of a page), the newest layer of the new text stands in for the chosen one, titled as
 * such: the reader's text is drawn after the first layer's file, not after every file up to the chosen layer's
 * (chapter 2 opens on layer 3: 7.7 MB gzip fetched instead of 21 MB).
 */
export class LayerMaps {
  constructor(view, numLayers, start, roles = null) {
    this.view = view;
    this.bookRoles = rolesOf(roles); // the book's measured roles of its model's heads (chapter 8)
    this.roles = this.bookRoles;
    this.which = start;
    this.node = el("div");
    this.grids = [];
    this.next = null; // a run's maps arriving: {tokens, attentions: [layer] (holes until computed), mask, input}
    this.drawnVmax = null;
    this.control = layerControl(numLayers, start, (which) => {
      if (which !== this.which) this.view.clearReadout(); // the readout named a cell of the layer shown before
      this.which = which;
      this.draw();
    });
  }

  /** Maps of a model with `n` layers follow (the reader's own model): the control's range changes, no draw. */
  setLayerCount(n) {
    this.which = this.control.setLayers(n);
  }

  /** Whose maps follow: the book's model keeps its roles, the reader's own model has none. */
  useBookRoles(book) {
    this.roles = book ? this.bookRoles : null;
  }

  /** The heads drawn now, [{label, tokens, map, off}], in the order shown (the export's). */
  shownHeads() {
    return headsOf(this.attentions, this.which, this.mask, this.roles).flat().map((h) => ({ ...h, tokens: this.tokens }));
  }

  /** The layers shown now (the slider's, its stand-in while it is fetched, or all of them). */
  shownLayers() {
    const count = (this.next?.attentions.length) || (this.attentions ? this.attentions.length : 0);
    return this.which === "all" ? Array.from({ length: count }, (_, l) => l) : [this.standIn() ?? this.which];
  }

  /**
   * The run begun will wait for the file of layer `l` (not in yet): if that is the chosen layer or one before it, then
   * until the chosen layer arrives the newest layer in stands in for it, drawn at once if one is in already.
   */
  fetching(l) {
    const next = this.next;
    if (!next || next.fetching || typeof this.which !== "number" || l > this.which) return;
    next.fetching = true;
    const standIn = this.standIn();
    if (standIn === null) return;
    this.draw();
    performance.mark("mha-layer-drawn", { detail: standIn }); // as setLayer: new maps on screen
  }

  /** The newest layer of the run begun drawn in place of the chosen one, while that one's file is fetched; else null. */
  standIn() {
    const next = this.next;
    if (!next?.fetching || typeof this.which !== "number" || next.attentions[this.which]) return null;
    for (let l = this.which - 1; l >= 0; l--) if (next.attentions[l]) return l;
    return null;
  }

  /**
   * New maps of the text `input`, every layer at once: the readout of an earlier text's cell is cleared. Where
   * only the head mask changed (a toggle greys a head), only the grids of its changed layers are drawn again.
   * Resolves when every layer is drawn. `input` (kept as this.input) is what the export names.
   */
  show(tokens, attentions, mask = null, input = this.input) {
    const fresh = tokens !== this.tokens || attentions !== this.attentions;
    const before = this.mask;
    this.input = input;
    this.tokens = tokens;
    this.attentions = attentions;
    this.mask = mask;
    this.next = null;
    if (fresh) this.view.clearReadout();
    if (!fresh && before && mask && this.drawnVmax !== null) { // the same maps: redraw the layers whose heads changed
      const changed = new Set(mask.map((row, l) => (row.some((on, h) => !on !== !before[l][h]) ? l : -1)));
      return this.draw((l) => changed.has(l));
    }
    return this.draw();
  }

  /** A run's maps of `tokens` (text `input`, head mask `mask`) start to arrive (setLayer, then commit). */
  begin(tokens, numLayers, mask = null, input = this.input) {
    if (!sameTokens(tokens, this.tokens)) this.view.clearReadout();
    this.next = { tokens, attentions: new Array(numLayers), mask, input };
  }

  /** Layer `l`'s maps of the run begun ([head][query][key]): its grid is drawn now if it is shown. */
  setLayer(l, maps) {
    if (!this.next) return Promise.resolve();
    this.next.attentions[l] = maps;
    // a layer the run kept (the same maps object: a head toggled in a later layer) is not drawn again
    const same = this.attentions && this.attentions[l] === maps && sameTokens(this.next.tokens, this.tokens);
    const drawn = same ? Promise.resolve() : this.draw((layer) => layer === l);
    // benchmarks/bench_live.py and the tests: when the first new maps show (a layer on screen)
    if (!same && this.shownLayers().includes(l)) performance.mark("mha-layer-drawn", { detail: l });
    return drawn;
  }

  /** Every layer of the run begun has arrived: its maps become the ones shown and exported. */
  commit() {
    if (!this.next) return;
    const { tokens, attentions, mask, input } = this.next;
    this.next = null;
    Object.assign(this, { tokens, attentions, mask, input });
  }

  /** The maps and tokens drawn for layer `l`: the run's where they arrived, else those before. */
  layerState(l) {
    const next = this.next;
    if (next?.attentions[l]) return { maps: next.attentions[l], tokens: next.tokens, mask: next.mask };
    return { maps: this.attentions[l], tokens: this.tokens, mask: this.mask };
  }

  /**
   * Draw the layer(s) chosen (`only(l)`: just the layers it accepts, unless the colour scale changed): one layer
   * per task, so that six layers of 12 maps never hold the page for long; a newer draw (new text, another layer,
   * a resize) stops an older one. The column width is read once, so drawing a grid does not force the page's
   * layout again for the next. Its time goes to the view's clock (the draw part of an update).
   * @returns {Promise<void>} resolved when this draw has finished or was overtaken
   */
  async draw(only = null) {
    if (!this.attentions) return;
    const layers = this.shownLayers().filter((l) => this.layerState(l).maps);
    const standIn = this.standIn();
    const groups = layers.map((l) => {
      const { maps, mask, tokens } = this.layerState(l);
      return { tokens, heads: headsOf([maps], 0, mask ? [mask[l]] : null, null)[0].map((h, i) => {
        const role = this.roles?.get(`${l}.${i}`);
        return { ...h, label: role ? `L${l}.H${i} · ${role}` : `L${l}.H${i}`, layer: l };
      }) };
    });
    const vmax = largestWeight(groups.flatMap((g) => g.heads.map((h) => h.map)));
    if (vmax !== this.drawnVmax) only = null; // a new colour scale: every grid again
    this.vmax = vmax;
    this.drawnVmax = vmax;
    const clock = this.view.clock;
    if (!only) this.view.legend.show(vmax);
    this.drawing = (this.drawing || 0) + 1;
    const drawing = this.drawing;
    // one grid per layer shown, each under its title; grids are reused between redraws
    while (this.grids.length > groups.length) this.grids.pop().box.remove();
    const width = this.node.clientWidth || 600;
    let first = true;
    for (let i = 0; i < groups.length; i++) {
      if (only && !only(layers[i]) && this.grids[i]) continue;
      if (!first) {
        await nextTask();
        if (drawing !== this.drawing) return;
      }
      first = false;
      const t0 = performance.now();
      this.drawGrid(i, groups[i], groups.length, vmax, width, standIn === layers[i]);
      if (clock) clock.add("draw", performance.now() - t0);
    }
    this.keepZoom(groups, vmax);
  }

  /** Grid `i` (of `count` shown) with `group`'s heads; `standIn`: drawn in place of the chosen layer (titled so). */
  drawGrid(i, group, count, vmax, width, standIn = false) {
    const { heads, tokens } = group;
    if (!this.grids[i]) {
      const grid = new HeadGrid({ readout: this.view.readout, minMap: count > 1 ? 72 : 110 });
      const title = el("p", { class: "mha-live-layer-title" });
      const box = el("div", {}, title, grid.node);
      this.node.append(box);
      this.grids[i] = { grid, title, box };
    }
    const { grid, title } = this.grids[i];
    grid.minMap = count > 1 ? 72 : 110;
    title.hidden = count === 1 && !standIn;
    setText(title, standIn
      ? t("Layer {layer} of your text, shown until layer {chosen} arrives (its file and those before it are on their way).",
        { layer: heads[0].layer, chosen: this.which })
      : t("layer {layer}", { layer: heads[0].layer }));
    grid.onEnlarge = (h) => {
      this.view.lastFocus = grid.buttons[h];
      this.view.enlarge(grid.heads[h], grid.tokens, this.vmax, grid, h);
    };
    grid.show(heads, tokens, vmax, width);
  }

  /** The enlarged head stays under its row, with its new weights; closed when its layer is no longer shown. */
  keepZoom(groups, vmax) {
    const zoom = this.view.zoom;
    if (zoom.node.hidden || !zoom.head) return;
    const label = zoom.head.label;
    const i = groups.findIndex((g) => g.heads.some((h) => h.label === label));
    if (i >= 0) {
      const h = groups[i].heads.findIndex((x) => x.label === label);
      this.grids[i].grid.placeZoom(zoom.node, h);
      zoom.open(groups[i].heads[h], groups[i].tokens, vmax);
    } else {
      zoom.node.hidden = true; // its layer is no longer shown
      this.view.root.insertBefore(zoom.node, this.node);
    }
  }
}
