// Builds src/pincer/canvas/assets/a2ui-renderer.js: pincer's glue (glue.js) and the A2UI project's
// renderers it imports (@a2ui/lit and @a2ui/web_core, at the versions package-lock.json pins), as
// one classic script the A2UI frame runs under its nonce. Run by `make a2ui-renderer`, with
// node_modules installed by `npm ci` in a cache prefix; nothing of it runs when pincer runs.
//
// Usage: node build.mjs NODE_MODULES OUT
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [nodeModules, out] = process.argv.slice(2);
if (!nodeModules || !out) {
  console.error("usage: node build.mjs NODE_MODULES OUT");
  process.exit(2);
}
const { build } = await import(path.resolve(nodeModules, "esbuild", "lib", "main.js"));
const here = path.dirname(fileURLToPath(import.meta.url));

// @a2ui/lit's v0.8 elements and web_core's v0.9 basic catalog both define <a2ui-card>,
// <a2ui-modal>, <a2ui-surface> and more, and one document has one custom element registry: the
// v0.8 half gets its own names (a2ui08-*), consistently in every file of it (its element
// definitions and the templates that use them), so a canvas can show surfaces of both versions.
const LEGACY_TAGS =
  /\ba2ui-(audioplayer|button|card|checkbox|column|datetimeinput|divider|icon|image|list|modal|multiplechoice|root|row|slider|surface|tabs|textfield|text|video)\b/g;
const legacyNames = {
  name: "a2ui-v08-names",
  setup(b) {
    b.onLoad({ filter: /[\\/]@a2ui[\\/]lit[\\/]src[\\/]0\.8[\\/].*\.js$/ }, async (args) => ({
      contents: (await readFile(args.path, "utf8")).replace(LEGACY_TAGS, "a2ui08-$1"),
      loader: "js",
    }));
  },
};

await build({
  entryPoints: [path.join(here, "glue.js")],
  outfile: out,
  bundle: true,
  format: "iife",
  platform: "browser",
  target: "chrome120",
  minify: true,
  legalComments: "eof",
  charset: "utf8",
  nodePaths: [path.resolve(nodeModules)],
  // The optional markdown renderer is not part of the build: text stays text.
  external: ["@a2ui/markdown-it"],
  plugins: [legacyNames],
  logLevel: "warning",
});
