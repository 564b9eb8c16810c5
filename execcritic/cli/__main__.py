from execcritic.cli import main

main()
