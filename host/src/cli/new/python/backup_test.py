class Label(unittest.TestCase):
    def test_a_pvc_is_labelled_with_the_number_of_pvcs_in_its_namespace(self):
        listed = []

        def list_pvcs(namespace):
            listed.append(namespace)
            return ["{}", "{}"] if namespace == "apps" else ["{}"]

        item = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": "apps"}}
        response = app.label(json.dumps(item), list_pvcs)
        labelled = json.loads(response.item)
        self.assertEqual(labelled["metadata"]["labels"][app.LABEL], "2")
        self.assertEqual(response.additional_items, [])
        self.assertEqual(listed, ["apps"])

    def test_a_suspended_action_hands_the_pvc_back_as_it_came(self):
        item = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": "apps"}}
        suspended = app.settings.read(app.Settings, {"suspend": "true"}.get)
        response = app.label(json.dumps(item), lambda namespace: self.fail("listed"), suspended)
        self.assertEqual(json.loads(response.item), item)

    def test_the_settings_default_to_the_manifests_defaults(self):
        self.assertEqual(app.settings.read(app.Settings, {}.get), app.Settings(suspend=False))
