from pincer.cli.main import main

main()
