"""A stand-in for PyTorch's test/test_cuda.py, for the suite's own test: real
unittest output, one test that fails only under LD_PRELOAD."""
import os
import unittest


class TestCuda(unittest.TestCase):
    def test_passes(self):
        self.assertTrue(True)

    def test_fails_under_a_preload(self):
        """A docstring's first line, which unittest -v prints before the outcome."""
        self.assertNotIn("vgpumem", os.environ.get("LD_PRELOAD", ""))

    @unittest.skip("not on this machine")
    def test_skipped(self):
        pass


class TestCudaMallocAsync(unittest.TestCase):
    def test_errors(self):
        print("some output of the test's own")
        raise RuntimeError("always")


if __name__ == "__main__":
    unittest.main()
