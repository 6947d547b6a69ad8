const PVC = { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'data', namespace: 'apps' } };
const RESTORE = JSON.stringify({ metadata: { name: 'nightly-restore' } });

test('a missing PVC is restored labelled with its restore', () => {
  const asked = [];
  const getPvc = (namespace, name) => {
    asked.push([namespace, name]);
    return null;
  };
  const response = app.restore(JSON.stringify(PVC), RESTORE, getPvc);
  assert.equal(JSON.parse(response.item).metadata.labels[app.LABEL], 'nightly-restore');
  assert.equal(response.skipRestore, false);
  assert.deepEqual(asked, [['apps', 'data']]);
});

test('a PVC that exists is skipped', () => {
  const response = app.restore(JSON.stringify(PVC), RESTORE, () => '{}');
  assert.equal(response.skipRestore, true);
  assert.equal(response.item, undefined);
});

test('a suspended action restores the PVC as it came', () => {
  const suspended = settings.read(app.SETTINGS, (key) => ({ suspend: 'true' })[key]);
  const response = app.restore(JSON.stringify(PVC), RESTORE, () => assert.fail('read'), suspended);
  assert.deepEqual(JSON.parse(response.item), PVC);
  assert.equal(response.skipRestore, false);
});

test('the restore hook reads through the host: not found restores, another error fails', async () => {
  const { fake } = await import('./fakes/kube.js');
  const request = { item: JSON.stringify(PVC), itemFromBackup: JSON.stringify(PVC), restore: RESTORE };
  fake.get = () => {
    throw { payload: { tag: 'not-found', val: 'no such PVC' } };
  };
  assert.equal(app.actions.restore(app.ACTION, request).skipRestore, false);
  fake.get = () => {
    throw { payload: { tag: 'forbidden', val: 'not granted' } };
  };
  assert.throws(() => app.actions.restore(app.ACTION, request), /reading PVC apps\/data: not granted/);
  assert.throws(() => app.actions.backup(app.ACTION, {}), /does not implement backup/);
});
