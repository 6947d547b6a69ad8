class Forget(unittest.TestCase):
    def test_deleting_a_backup_deletes_the_notes_of_its_pvc(self):
        deleted = []
        item = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": "apps"}}
        backup = {"kind": "Backup", "metadata": {"name": "nightly", "namespace": "velero"}}
        app.forget(json.dumps(item), json.dumps(backup), lambda ns, name: deleted.append((ns, name)))
        self.assertEqual(deleted, [("apps", "nightly-data")])

    def test_a_suspended_action_deletes_nothing(self):
        item = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": "apps"}}
        suspended = app.settings.read(app.Settings, {"suspend": "true"}.get)
        app.forget(json.dumps(item), "{}", lambda ns, name: self.fail("deleted"), suspended)
