const PVC = JSON.stringify({ metadata: { name: 'data', namespace: 'apps' } });
const BACKUP = JSON.stringify({ metadata: { name: 'nightly' } });

test('the notes ConfigMap of the PVC is deleted', () => {
  const deleted = [];
  app.forget(PVC, BACKUP, (namespace, name) => deleted.push([namespace, name]));
  assert.deepEqual(deleted, [['apps', 'nightly-data']]);
});

test('a suspended action deletes nothing', () => {
  const suspended = settings.read(app.SETTINGS, (key) => ({ suspend: 'true' })[key]);
  app.forget(PVC, BACKUP, () => assert.fail('deleted'), suspended);
});

test('the delete hook deletes through the host; a ConfigMap already gone is fine', async () => {
  const { fake } = await import('./fakes/kube.js');
  const deleted = [];
  fake.delete = (api, namespace, name) => deleted.push([api.resource, namespace, name]);
  app.actions.delete(app.ACTION, PVC, BACKUP);
  assert.deepEqual(deleted, [['configmaps', 'apps', 'nightly-data']]);
  fake.delete = () => {
    throw { payload: { tag: 'not-found', val: 'gone' } };
  };
  app.actions.delete(app.ACTION, PVC, BACKUP);
  fake.delete = () => {
    throw { payload: { tag: 'denied', val: 'not granted' } };
  };
  assert.throws(() => app.actions.delete(app.ACTION, PVC, BACKUP), /deleting ConfigMap apps\/nightly-data: not granted/);
});
