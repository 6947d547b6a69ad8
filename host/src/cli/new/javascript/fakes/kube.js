// A fake of the WIT's `kube` import for native tests: each call goes to the function a test set in
// `fake` (none set: the test did not expect the call).

export const fake = {};

function call(name, args) {
  if (!fake[name]) throw new Error(`kube.${name} called, and the test set no fake for it`);
  return fake[name](...args);
}

export function get(...args) {
  return call('get', args);
}
export function list(...args) {
  return call('list', args);
}
function remove(...args) {
  return call('delete', args);
}
export { remove as delete };
