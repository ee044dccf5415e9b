from i2ce_jax.pretrained.rebuild import main

main()
