// pincer's glue around the A2UI project's renderers: @a2ui/lit's v0.8 surface and its v0.9 surface
// on @a2ui/web_core's message processor and basic catalog. It runs in pincer's A2UI document only
// (sandboxed, no network, nonce'd scripts; docs/canvas.md "Why it holds"), after the gateway has
// checked every message against the catalog its surface names. What it adds:
//
// - window.pincerA2ui.show(messages, container): renders the surfaces from scratch;
// - a person's action leaves as pincer.send("a2ui_action", {name, surfaceId, message}), the message
//   in its version's client-to-server shape, and only while the browser dispatches a click it
//   says a person made (event.isTrusted): a script's synthetic click sends nothing;
// - the minimal catalog's capitalize function, and custom catalogs drawn with the basic
//   catalog's components (the gateway has checked them against their own schema);
// - text stays text: no markdown renderer, so no markup from a surface;
// - style bindings through CSSOM, so the frame's policy allows no inline style at all.
// It listens to no message from any window.
import { ContextProvider } from "@lit/context";
import { z } from "zod";
import { v0_8 } from "@a2ui/lit";
import * as UI08 from "@a2ui/lit/ui";
import "@a2ui/lit/v0_9";
import { Catalog, CommonSchemas, MessageProcessor, createFunctionImplementation } from "@a2ui/web_core/v0_9";
import {
  BASIC_FUNCTIONS,
  A2uiButton,
  A2uiColumn,
  A2uiRow,
  A2uiText,
  A2uiTextField,
  basicCatalog,
} from "@a2ui/web_core/v0_9/basic_catalog";

const MINIMAL_CATALOG = "https://a2ui.org/specification/v0_9/catalogs/minimal/catalog.json";

const capitalize = createFunctionImplementation(
  { name: "capitalize", returnType: "string", schema: z.object({ value: CommonSchemas.DynamicString }) },
  (args) => {
    const text = args.value === undefined || args.value === null ? "" : String(args.value);
    return text.charAt(0).toUpperCase() + text.slice(1);
  },
);
const minimalCatalog = new Catalog(MINIMAL_CATALOG, [A2uiText, A2uiRow, A2uiColumn, A2uiButton, A2uiTextField], [capitalize]);
const basicComponents = [...basicCatalog.components.values()];

// Lit writes a style binding's first value as a style attribute, which this document's policy
// (styles by nonce only) blocks; the same declarations set through CSSOM are not: only this
// document's own nonce'd scripts can set them, and a surface's values still pass its catalog.
const setAttribute = Element.prototype.setAttribute;
Element.prototype.setAttribute = function (name, value) {
  if (String(name).toLowerCase() === "style" && this.style) {
    this.style.cssText = String(value);
    return;
  }
  setAttribute.call(this, name, value);
};

// A click counts while the browser dispatches it: set in the capture phase at the window (before
// any element's listener), cleared once the dispatch and the microtasks it queued are over.
let personClicking = false;
window.addEventListener(
  "click",
  (event) => {
    personClicking = event.isTrusted;
    if (personClicking) setTimeout(() => (personClicking = false), 0);
  },
  true,
);

function send(version, action) {
  if (!personClicking) return;
  const message = version === "v0.9" ? { version: "v0.9", action } : { userAction: action };
  window.pincer.send("a2ui_action", { name: action.name, surfaceId: action.surfaceId, message });
}

function note(container, text) {
  const p = document.createElement("p");
  p.className = "a2ui-error";
  p.textContent = text;
  container.appendChild(p);
}

// v0.8 asks its host for a theme (class names per element) and a markdown renderer: no classes
// (pincer's own styles apply), and markdown shown as the text it is.
const none = (...names) => Object.fromEntries(names.map((name) => [name, {}]));
const labelled = none("container", "element", "label");
const THEME = {
  components: {
    ...none("AudioPlayer", "Button", "Card", "Column", "Divider", "Icon", "List", "Row", "Video"),
    CheckBox: labelled, DateTimeInput: labelled, MultipleChoice: labelled, Slider: labelled, TextField: labelled,
    Image: none("all", "icon", "avatar", "smallFeature", "mediumFeature", "largeFeature", "header"),
    Modal: none("backdrop", "element"),
    Tabs: { ...none("container", "element"), controls: none("all", "selected") },
    Text: none("all", "h1", "h2", "h3", "h4", "h5", "caption", "body"),
  },
  elements: none("a", "audio", "body", "button", "h1", "h2", "h3", "h4", "h5", "iframe", "input", "p", "pre", "textarea", "video"),
  markdown: Object.fromEntries(["p", "h1", "h2", "h3", "h4", "h5", "ul", "ol", "li", "a", "strong", "em"].map((name) => [name, []])),
};
function escapeText(text) {
  const box = document.createElement("span");
  box.textContent = String(text);
  return Promise.resolve(box.innerHTML);
}

function showV08(messages, container) {
  const processor = v0_8.Data.createSignalA2uiMessageProcessor();
  try {
    processor.processMessages(messages);
  } catch (error) {
    note(container, "the v0.8 surfaces could not be shown: " + error);
    return;
  }
  for (const [surfaceId, surface] of processor.getSurfaces()) {
    const host = document.createElement("section");
    host.className = "a2ui-surface";
    host.dataset.surfaceId = surfaceId;
    new ContextProvider(host, { context: UI08.Context.theme, initialValue: THEME });
    new ContextProvider(host, { context: UI08.Context.markdown, initialValue: escapeText });
    const element = document.createElement("a2ui08-surface");
    element.surfaceId = surfaceId;
    element.surface = surface;
    element.processor = processor;
    element.addEventListener("a2uiaction", (event) => {
      const { action, dataContextPath, sourceComponent, sourceComponentId } = event.detail;
      const context = {};
      for (const item of action.context || []) {
        const value = item.value || {};
        if ("path" in value) {
          const path = processor.resolvePath(value.path, dataContextPath);
          context[item.key] = processor.getData(sourceComponent, path, surfaceId);
        } else {
          for (const key of ["literalString", "literalNumber", "literalBoolean"]) {
            if (key in value) context[item.key] = value[key];
          }
        }
      }
      send("v0.8", { name: action.name, surfaceId, sourceComponentId, timestamp: new Date().toISOString(), context });
    });
    host.appendChild(element);
    container.appendChild(host);
  }
}

function showV09(messages, container) {
  const catalogs = [basicCatalog, minimalCatalog];
  for (const message of messages) {
    const id = message.createSurface && message.createSurface.catalogId;
    if (id && !catalogs.some((c) => c.id === id)) catalogs.push(new Catalog(id, basicComponents, BASIC_FUNCTIONS));
  }
  const processor = new MessageProcessor(catalogs, (action) => send("v0.9", action));
  const order = [];
  processor.onSurfaceCreated((surface) => order.push(surface));
  for (const message of messages) {
    try {
      processor.processMessage(message);
    } catch (error) {
      note(container, "an A2UI message could not be shown: " + error);
    }
  }
  for (const surface of order) {
    if (!processor.model.getSurface(surface.id)) continue; // deleted since
    const host = document.createElement("section");
    host.className = "a2ui-surface";
    host.dataset.surfaceId = surface.id;
    const element = document.createElement("a2ui-surface");
    element.surface = surface;
    host.appendChild(element);
    container.appendChild(host);
  }
}

window.pincerA2ui = Object.freeze({
  show(messages, container) {
    container.textContent = "";
    showV08(messages.filter((m) => !("version" in m)), container);
    showV09(messages.filter((m) => "version" in m), container);
  },
});
