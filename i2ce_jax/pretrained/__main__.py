from i2ce_jax.pretrained import main

main()
