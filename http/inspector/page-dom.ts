/**
 * What the inspector's two pages share in the browser (`dom.js`, an ES module both import): the
 * element builder that puts what executors send in text nodes only (never markup), and the
 * element lookup.
 */

/** The shared module. */
export const DOM_JS = String
  .raw`/** An element with attributes (on* are listeners) and children (strings become text). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(4)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}
/** The element with \`id\`. */
export const $ = (id) => document.getElementById(id);
`;
