// dom.mjs -- the only ways the views touch the page's structure: elements and text, never HTML.
//
// Safety: every text from the reader or the data reaches the page through textContent (setText)
// or canvas fillText, never innerHTML.

/** A new element, with attributes (values as strings) and text children (as text). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined && v !== false) node.setAttribute(k, String(v));
  for (const child of children) node.append(typeof child === "string" ? document.createTextNode(child) : child);
  return node;
}
/** The only way text reaches the page: as text, never parsed as HTML. */
export function setText(node, text) {
  node.textContent = String(text);
  return node;
}
/** `fn` called `ms` after the last of a burst of calls (with that call's arguments). */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
