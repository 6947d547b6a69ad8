class Restore(unittest.TestCase):
    RESTORE = json.dumps({"kind": "Restore", "metadata": {"name": "nightly-restore"}})

    def pvc(self, name):
        return json.dumps({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": name, "namespace": "apps"}})

    def get_pvc(self, namespace, name):
        self.read.append((namespace, name))
        return "{}" if (namespace, name) == ("apps", "logs") else None

    def setUp(self):
        self.read = []

    def test_a_missing_pvc_is_restored_with_the_name_of_its_restore(self):
        response = app.restore(self.pvc("data"), self.RESTORE, self.get_pvc)
        self.assertFalse(response.skip_restore)
        self.assertEqual(json.loads(response.item)["metadata"]["labels"][app.LABEL], "nightly-restore")
        self.assertEqual(self.read, [("apps", "data")])

    def test_a_pvc_that_exists_is_skipped(self):
        response = app.restore(self.pvc("logs"), self.RESTORE, self.get_pvc)
        self.assertTrue(response.skip_restore)
        self.assertIsNone(response.item)

    def test_a_suspended_action_hands_the_pvc_back_as_it_came(self):
        suspended = app.settings.read(app.Settings, {"suspend": "true"}.get)
        response = app.restore(self.pvc("data"), self.RESTORE, self.get_pvc, suspended)
        self.assertFalse(response.skip_restore)
        self.assertEqual(json.loads(response.item), json.loads(self.pvc("data")))
        self.assertEqual(self.read, [])
