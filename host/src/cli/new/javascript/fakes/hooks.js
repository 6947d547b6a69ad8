// Natively (`node --test`), the WIT's imports are these fakes: `import 'velero-wasm:plugin/kube@…'`
// loads fakes/kube.js, and so on. The tests register this file (node:module's `register`) before they
// import app.js; componentize-js's build binds the real imports instead.

export async function resolve(specifier, context, next) {
  const wit = /^velero-wasm:plugin\/([a-z-]+)(@.*)?$/.exec(specifier);
  if (wit) {
    return { url: new URL(`./${wit[1]}.js`, import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
