"""mpi_resolver.tensorflow, the long jobs' TensorFlow edge: every module there imports
TensorFlow, so its tests run with the installed TensorFlow in tests/tf (test_preemption,
test_periodic, test_tf_quirks, test_watchdog_callback) and on the cluster; the pure rules it
calls are tested in tests/unit/long_jobs."""
