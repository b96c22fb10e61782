"""A typical single-machine Keras script: a small classifier on synthetic data, model.fit.
Run: python original.py (docs/own-script.md ports it to a Slurm job, twice)."""

import keras
import numpy as np

EPOCHS = 5
BATCH_SIZE = 64
SAMPLES = 3200

# Synthetic data: 20 features, 4 classes drawn by a fixed random linear rule.
rng = np.random.default_rng(0)
x = rng.normal(size=(SAMPLES, 20)).astype("float32")
y = np.argmax(x @ rng.normal(size=(20, 4)), axis=1).astype("int32")

keras.utils.set_random_seed(1)
model = keras.Sequential([
    keras.Input(shape=(20,)),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dense(4),
])
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(x, y, batch_size=BATCH_SIZE, epochs=EPOCHS, verbose=2)

accuracy = float(np.mean(np.argmax(model(x), axis=1) == y))
print(f"steps trained: {model.optimizer.iterations.numpy()}, accuracy: {accuracy:.3f}")
model.save("model.keras")
