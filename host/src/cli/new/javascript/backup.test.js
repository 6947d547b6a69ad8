const PVC = { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'data', namespace: 'apps' } };

test('a PVC is labelled with the number of PVCs in its namespace', () => {
  const listed = [];
  const listPvcs = (namespace) => {
    listed.push(namespace);
    return namespace === 'apps' ? ['{}', '{}'] : ['{}'];
  };
  const response = app.label(JSON.stringify(PVC), listPvcs);
  assert.equal(JSON.parse(response.item).metadata.labels[app.LABEL], '2');
  assert.deepEqual(response.additionalItems, []);
  assert.deepEqual(listed, ['apps']);
});

test('a suspended action hands the PVC back as it came', () => {
  const suspended = settings.read(app.SETTINGS, (key) => ({ suspend: 'true' })[key]);
  const response = app.label(JSON.stringify(PVC), () => assert.fail('listed'), suspended);
  assert.deepEqual(JSON.parse(response.item), PVC);
});

test('the settings default to the manifest\'s defaults', () => {
  assert.deepEqual(settings.read(app.SETTINGS, () => undefined), { suspend: false });
});

test('the backup hook reads the host\'s settings and lists through the host', async () => {
  const { fake } = await import('./fakes/kube.js');
  const config = await import('./fakes/config.js');
  fake.list = (api, namespace) => (api.resource === 'persistentvolumeclaims' && namespace === 'apps' ? ['{}'] : []);
  const response = app.actions.backup(app.ACTION, { item: JSON.stringify(PVC), backup: '{}' });
  assert.equal(JSON.parse(response.item).metadata.labels[app.LABEL], '1');
  config.settings.suspend = 'true';
  try {
    fake.list = () => assert.fail('listed while suspended');
    assert.deepEqual(JSON.parse(app.actions.backup(app.ACTION, { item: JSON.stringify(PVC), backup: '{}' }).item), PVC);
  } finally {
    delete config.settings.suspend;
  }
  assert.throws(() => app.actions.restore(app.ACTION, {}), /does not implement restore/);
});
