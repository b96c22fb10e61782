"""A resolution, end to end: which sources to read (plan), the job's GPUs from every rank's
record (gpu_resolution), the resolution itself (resolution), the snapshot of the variables
it reads (environment), and the TensorFlow edge, MPIClusterResolver (tf_resolver), which
alone imports TensorFlow and is imported only when its name is used.

May import every part below it (core up to network). Independent of long_jobs/ and its
TensorFlow edge. Only rehearsal/, cli/ and the package's lazy names import it.
"""
