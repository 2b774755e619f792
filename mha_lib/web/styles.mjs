// styles.mjs -- the views' stylesheet, mha_live.css, added to the page once.
//
// In the book the page links the file beside this module. A kernel's widget loads these modules as one
// text from a blob: URL, which has no folder: mha_lib.live.widget_esm() writes the CSS into INLINE_CSS.

import { el } from "./dom.mjs";

const INLINE_CSS = null; // widget_esm() puts mha_live.css here

/** Add the views' stylesheet to the page (once): a <link> to mha_live.css, or the inlined text. */
export function addStyle() {
  if (document.getElementById("mha-live-style")) return;
  const style = INLINE_CSS === null
    ? el("link", { id: "mha-live-style", rel: "stylesheet", href: new URL("./mha_live.css", import.meta.url).href })
    : el("style", { id: "mha-live-style" });
  if (INLINE_CSS !== null) style.textContent = INLINE_CSS;
  document.head.append(style);
}
