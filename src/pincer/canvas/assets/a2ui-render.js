// pincer's renderer of the A2UI standard component catalog (v0.8 "standard", v0.9 "basic").
// It runs in pincer's own A2UI frame (sandboxed, opaque origin, no network, only nonce-carrying
// scripts: no agent-written script shares its document); the gateway has validated every message
// against its version's schema before it got here, and checks that an action names a control of
// the rendering it came from. Text is set with
// textContent, never innerHTML: a surface cannot inject markup. A person's action leaves as
// pincer.send("a2ui_action", {...}) in the shape of the version's client-to-server message.
(function () {
  "use strict";
  const surfaces = {};

  function pointerGet(model, path) {
    if (path === undefined || path === null || path === "" || path === "/") return model;
    const parts = String(path).replace(/^\//, "").split("/");
    let at = model;
    for (const raw of parts) {
      const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
      if (at === null || typeof at !== "object") return undefined;
      at = at[key];
    }
    return at;
  }

  function pointerSet(model, path, value) {
    const parts = String(path || "/").replace(/^\//, "").split("/").filter((p) => p !== "");
    if (!parts.length) return value;
    let at = model;
    parts.forEach((raw, i) => {
      const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
      if (i === parts.length - 1) {
        if (value === undefined) delete at[key];
        else at[key] = value;
      } else {
        if (at[key] === null || typeof at[key] !== "object") at[key] = {};
        at = at[key];
      }
    });
    return model;
  }

  function fromContents(contents) {
    const out = {};
    for (const entry of contents || []) {
      if ("valueString" in entry) out[entry.key] = entry.valueString;
      else if ("valueNumber" in entry) out[entry.key] = entry.valueNumber;
      else if ("valueBoolean" in entry) out[entry.key] = entry.valueBoolean;
      else if ("valueMap" in entry) out[entry.key] = fromContents(entry.valueMap);
    }
    return out;
  }

  // v0.8 bound values: {literalString|literalNumber|literalBoolean|path}; v0.9: a literal or {path}.
  function resolve(surface, bound) {
    if (bound === undefined || bound === null) return undefined;
    if (typeof bound !== "object" || Array.isArray(bound)) return bound;
    if ("path" in bound) return pointerGet(surface.model, bound.path);
    for (const key of ["literalString", "literalNumber", "literalBoolean", "literal"]) {
      if (key in bound) return bound[key];
    }
    if ("call" in bound) return "";
    return undefined;
  }

  function text(surface, bound) {
    const value = resolve(surface, bound);
    return value === undefined || value === null ? "" : String(value);
  }

  function pathOf(bound) {
    return bound && typeof bound === "object" && "path" in bound ? bound.path : null;
  }

  function childIds(surface, props) {
    const children = props.children !== undefined ? props.children : props.child !== undefined ? [props.child] : [];
    if (Array.isArray(children)) return children;
    if (children && Array.isArray(children.explicitList)) return children.explicitList;
    return [];
  }

  function actionContext(surface, context) {
    const out = {};
    if (Array.isArray(context)) {
      for (const item of context) out[item.key] = resolve(surface, item.value);
    } else if (context && typeof context === "object") {
      for (const key of Object.keys(context)) out[key] = resolve(surface, context[key]);
    }
    return out;
  }

  function fire(surface, componentId, action) {
    if (!action) return;
    const event = surface.version === "v0.9" ? action.event : action;
    if (!event || typeof event.name !== "string") return;
    const body = {
      name: event.name,
      surfaceId: surface.id,
      sourceComponentId: componentId,
      timestamp: new Date().toISOString(),
      context: actionContext(surface, event.context),
    };
    const message = surface.version === "v0.9" ? { version: "v0.9", action: body } : { userAction: body };
    window.pincer.send("a2ui_action", { name: event.name, surfaceId: surface.id, message: message });
  }

  // A component as {type, props}: v0.8 wraps props in {"Type": {...}}, v0.9 flattens them.
  function describe(surface, component) {
    if (surface.version === "v0.9") return { type: component.component, props: component };
    const type = Object.keys(component.component || {})[0];
    return { type: type, props: (component.component || {})[type] || {} };
  }

  function el(tag, cls) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    return node;
  }

  function render(surface, id, depth) {
    const component = surface.components[id];
    if (!component || depth > 64) return el("span");
    const { type, props } = describe(surface, component);
    const v9 = surface.version === "v0.9";
    let node;
    switch (type) {
      case "Text": {
        const hint = v9 ? props.variant : props.usageHint;
        node = el(/^h[1-5]$/.test(hint || "") ? hint : "p", "a2ui-text");
        node.textContent = text(surface, props.text);
        break;
      }
      case "Image": {
        node = el("img", "a2ui-image");
        node.alt = text(surface, props.altText || props.description);
        const src = text(surface, props.url);
        if (/^data:image\//.test(src)) node.src = src; // the frame has no network: only inline images show
        break;
      }
      case "Icon": {
        node = el("span", "a2ui-icon");
        node.textContent = text(surface, props.name);
        break;
      }
      case "Video":
      case "AudioPlayer": {
        node = el("span", "a2ui-media");
        node.textContent = "[" + type + "] " + text(surface, props.url);
        break;
      }
      case "Row":
      case "Column":
      case "List":
      case "Card":
      case "Modal": {
        node = el("div", "a2ui-" + type.toLowerCase());
        const ids = type === "Modal" ? [props.entryPointChild, props.contentChild, props.trigger, props.content].filter(Boolean) : childIds(surface, props);
        for (const child of ids) node.appendChild(render(surface, child, depth + 1));
        break;
      }
      case "Tabs": {
        node = el("div", "a2ui-tabs");
        for (const tab of props.tabItems || props.tabs || []) {
          const title = el("h4");
          title.textContent = text(surface, tab.title);
          node.appendChild(title);
          node.appendChild(render(surface, tab.child, depth + 1));
        }
        break;
      }
      case "Divider":
        node = el("hr", "a2ui-divider");
        break;
      case "Button": {
        node = el("button", "a2ui-button");
        node.type = "button";
        node.dataset.componentId = id;
        if (props.child) node.appendChild(render(surface, props.child, depth + 1));
        if (props.primary || props.variant === "primary") node.classList.add("primary");
        // Only a person's click counts (a script's synthetic click is not trusted by the browser).
        node.addEventListener("click", (event) => {
          if (event.isTrusted) fire(surface, id, props.action);
        });
        break;
      }
      case "TextField": {
        node = el("label", "a2ui-textfield");
        node.textContent = text(surface, props.label);
        const kind = v9 ? props.variant : props.textFieldType;
        const input = el(kind === "longText" ? "textarea" : "input");
        if (input.tagName === "INPUT") input.type = kind === "obscured" ? "password" : kind === "number" ? "number" : kind === "date" ? "date" : "text";
        const bound = v9 ? props.value : props.text;
        input.value = text(surface, bound);
        input.dataset.componentId = id;
        const path = pathOf(bound);
        input.addEventListener("input", () => {
          if (path) surface.model = pointerSet(surface.model, path, input.value);
        });
        node.appendChild(input);
        break;
      }
      case "CheckBox": {
        node = el("label", "a2ui-checkbox");
        const box = el("input");
        box.type = "checkbox";
        box.checked = Boolean(resolve(surface, props.value));
        box.dataset.componentId = id;
        const path = pathOf(props.value);
        box.addEventListener("change", () => {
          if (path) surface.model = pointerSet(surface.model, path, box.checked);
        });
        node.appendChild(box);
        node.appendChild(document.createTextNode(" " + text(surface, props.label)));
        break;
      }
      case "Slider": {
        node = el("input", "a2ui-slider");
        node.type = "range";
        node.min = String(props.minValue !== undefined ? props.minValue : props.min !== undefined ? props.min : 0);
        node.max = String(props.maxValue !== undefined ? props.maxValue : props.max !== undefined ? props.max : 100);
        node.value = String(resolve(surface, props.value) || 0);
        const path = pathOf(props.value);
        node.addEventListener("input", () => {
          if (path) surface.model = pointerSet(surface.model, path, Number(node.value));
        });
        break;
      }
      case "DateTimeInput": {
        node = el("input", "a2ui-datetime");
        node.type = props.enableTime && !props.enableDate ? "time" : props.enableTime ? "datetime-local" : "date";
        node.value = text(surface, props.value);
        const path = pathOf(props.value);
        node.addEventListener("input", () => {
          if (path) surface.model = pointerSet(surface.model, path, node.value);
        });
        break;
      }
      case "MultipleChoice":
      case "ChoicePicker": {
        node = el("select", "a2ui-choice");
        for (const option of props.options || []) {
          const item = el("option");
          item.value = String(option.value);
          item.textContent = text(surface, option.label);
          node.appendChild(item);
        }
        const bound = props.selections || props.value;
        const path = pathOf(bound);
        node.addEventListener("change", () => {
          if (path) surface.model = pointerSet(surface.model, path, [node.value]);
        });
        break;
      }
      default:
        node = el("span", "a2ui-unknown");
        node.textContent = "[" + type + "]";
    }
    const weight = props.weight !== undefined ? props.weight : component.weight;
    if (typeof weight === "number") node.style.flexGrow = String(weight);
    node.dataset.a2uiId = id;
    return node;
  }

  function apply(message) {
    const v9 = message.version === "v0.9";
    const action = Object.keys(message).find((k) => k !== "version");
    const body = message[action];
    const id = body.surfaceId;
    if (action === "deleteSurface") {
      delete surfaces[id];
      return;
    }
    const surface = (surfaces[id] = surfaces[id] || { id: id, version: v9 ? "v0.9" : "v0.8", components: {}, model: {}, root: v9 ? "root" : null });
    if (action === "beginRendering") surface.root = body.root;
    if (action === "surfaceUpdate" || action === "updateComponents") {
      for (const component of body.components) surface.components[component.id] = component;
    }
    if (action === "dataModelUpdate") {
      const value = fromContents(body.contents);
      surface.model = !body.path || body.path === "/" ? value : pointerSet(surface.model, body.path, value);
    }
    if (action === "updateDataModel") {
      surface.model = !body.path || body.path === "/" ? (body.value === undefined ? {} : body.value) : pointerSet(surface.model, body.path, body.value);
    }
  }

  window.pincerA2ui = {
    show(messages, container) {
      for (const message of messages) apply(message);
      container.textContent = "";
      for (const id of Object.keys(surfaces)) {
        const surface = surfaces[id];
        if (!surface.root || !surface.components[surface.root]) continue;
        const box = el("section", "a2ui-surface");
        box.dataset.surfaceId = id;
        box.appendChild(render(surface, surface.root, 0));
        container.appendChild(box);
      }
    },
  };
})();
