// layer_maps.mjs -- MiniLM's maps of one text, one layer or all, with the layer control: shared by the
// sentence and prune views. A head mask ([layer][head] 1 = on, 0 = off) draws the heads turned off grey.

import { HeadGrid } from "./draw.mjs";
import { largestWeight } from "./layout.mjs";
import { el, setText } from "./dom.mjs";
import { nextTask } from "./runtime_browser.mjs";
import { t } from "./i18n.mjs";

/** The layer control: a slider (aria-valuetext "layer 2 of 6") and an "all layers" switch. */
function layerControl(numLayers, start, onChange) {
  const id = `mha-live-layer-${Math.random().toString(36).slice(2)}`;
  const slider = el("input", { type: "range", id, min: "0", max: String(numLayers - 1), step: "1", value: String(start) });
  const value = el("output", { for: id });
  const all = el("input", { type: "checkbox", id: id + "-all" });
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
    const role = roles && roles.get(`${l}.${h}`);
    return { label: role ? `L${l}.H${h} · ${role}` : `L${l}.H${h}`, layer: l, head: h, map, off: !!mask && !mask[l][h] };
  }));
}

/** A config's roles ([{layer, head, role}]) as the Map headsOf reads, or null. */
export function rolesOf(roles) {
  return roles && roles.length ? new Map(roles.map((r) => [`${r.layer}.${r.head}`, r.role])) : null;
}

/** Shows MiniLM's maps of one text, one layer or all. Shared by the sentence and prune views. */
export class LayerMaps {
  constructor(view, numLayers, start, roles = null) {
    this.view = view;
    this.bookRoles = rolesOf(roles); // the book's measured roles of its model's heads (chapter 8)
    this.roles = this.bookRoles;
    this.which = start;
    this.node = el("div");
    this.grids = [];
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

  /**
   * New maps of the text `input`: the readout of an earlier text's cell is cleared. Resolves when every
   * layer is drawn. `input` (kept as this.input) is what the export names: the text of the maps drawn.
   */
  show(tokens, attentions, mask = null, input = this.input) {
    const fresh = tokens !== this.tokens || attentions !== this.attentions;
    this.input = input;
    this.tokens = tokens;
    this.attentions = attentions;
    this.mask = mask;
    if (fresh) this.view.clearReadout();
    return this.draw();
  }

  /**
   * Draw the layer(s) chosen: one layer per task, so that six layers of 12 maps never hold the page for
   * long; a newer draw (new text, another layer, a resize) stops an older one. The column width is read
   * once, so drawing a grid does not force the page's layout again for the next.
   * @returns {Promise<void>} resolved when this draw has finished or was overtaken
   */
  async draw() {
    if (!this.attentions) return;
    const drawing = (this.drawing = (this.drawing || 0) + 1);
    const groups = headsOf(this.attentions, this.which, this.mask, this.roles);
    const vmax = largestWeight(groups.flat().map((h) => h.map));
    this.vmax = vmax;
    this.view.legend.show(vmax);
    // one grid per layer shown, each under its title; grids are reused between redraws
    while (this.grids.length > groups.length) this.grids.pop().box.remove();
    const width = this.node.clientWidth || 600;
    for (let i = 0; i < groups.length; i++) {
      if (i > 0) {
        await nextTask();
        if (drawing !== this.drawing) return;
      }
      const heads = groups[i];
      if (!this.grids[i]) {
        const grid = new HeadGrid({ readout: this.view.readout, minMap: groups.length > 1 ? 72 : 110 });
        const title = el("p", { class: "mha-live-layer-title" });
        const box = el("div", {}, title, grid.node);
        this.node.append(box);
        this.grids[i] = { grid, title, box };
      }
      const { grid, title } = this.grids[i];
      grid.minMap = groups.length > 1 ? 72 : 110;
      title.hidden = groups.length === 1;
      setText(title, t("layer {layer}", { layer: heads[0].layer }));
      grid.onEnlarge = (h) => {
        this.view.lastFocus = grid.buttons[h];
        this.view.enlarge(grid.heads[h], this.tokens, vmax, grid, h);
      };
      grid.show(heads, this.tokens, vmax, width);
    }
    if (!this.view.zoom.node.hidden && this.view.zoom.head) {
      const label = this.view.zoom.head.label; // keep the enlarged head, with its new weights, under its row
      const i = groups.findIndex((heads) => heads.some((h) => h.label === label));
      if (i >= 0) {
        const h = groups[i].findIndex((x) => x.label === label);
        this.grids[i].grid.placeZoom(this.view.zoom.node, h);
        this.view.zoom.open(groups[i][h], this.tokens, vmax);
      } else {
        this.view.zoom.node.hidden = true; // its layer is no longer shown
        this.view.root.insertBefore(this.view.zoom.node, this.node);
      }
    }
  }
}
